"""Rank 0 admits a prefix only when the group's prefetch completion floor covers it
(sgl-project#1175/#1176).

`engine.admission.prefetch_floor`:
- `group` (default, #1175): rank 0 names one deferred rid per pass on its decision (round
  robin); every follower stamps `[rank, rid, matched, loaded]` for it on the decision as it
  passes (looking it up starts that rank's load-back too), and the last rank folds the rows
  into the header of the lap back to rank 0 (no payload: the lap completes when rank 0 reads
  it, where it reads the wire anyway; with nothing in flight the decision says rank 0 owes a
  blocking read of that lap). Rank 0 admits `want` only when the group floor covers it. A
  follower that is silent, or whose load-back is still running, contributes NO number
  (PENDING, never a zero): the rid is deferred by name while other work proceeds. When the
  bound (`engine.admission.prefetch_bound_ms`, rank 0's clock) expires, rank 0 clamps to what
  the group certainly holds instead of over-telling. `want <= 0` admits unconditionally.
- `rank0` (the log before #1175): rank 0 admits on its own, rank-local prefetch completion
  ("completed_synced" was a MIN reduce under tp > 1 only, never across PP ranks); a follower
  whose load has not landed cannot execute the forwarded row.

#1176: presence is `matched + loaded` (the sum, never the max), and a follower whose load
terminated short of what it began reports a CONTRADICTION on the same carrier; rank 0 stops the
group once, naming the peer (read before the `want <= 0` early-out). The carrier is active for
forwarded execution (`forwarded`, `row_authority`) at pp >= 2 with a host tier; `decision`
retracts on a pending load and the guard defers it (#944), a design of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

FLOORS = ("group", "rank0")
PENDING = -1  # the rank's load-back is under way: no number
CONTRADICTION = -2  # the rank's load terminated short of what it began: no number either
COMPLETE = 0  # a folded carrier: every follower reported a terminated number


def presence(matched: int, loaded: int) -> int | None:
    """What a rank holds: the tree's part plus what its load-back brought (#1176: the sum).
    None for a sentinel: PENDING and CONTRADICTION are never read as a length."""
    return None if loaded < 0 else matched + loaded


def _sure(row: tuple[int, int] | None) -> int:
    """What a rank certainly holds: its presence once complete, its tree part while its load
    runs (the load is not counted), nothing when it never spoke."""
    if row is None:
        return 0
    p = presence(*row)
    return row[0] if p is None else p


def fold(rows: dict[int, tuple[int, int]], followers: list[int]) -> tuple[int, int, int]:
    """The followers' rows for one rid as the three numbers the lap's header carries home:
    (CONTRADICTION, rank, matched) | (PENDING, sure floor, mask of silent/pending ranks) |
    (COMPLETE, presence floor, 0). A sentinel is never min()'d into a floor."""
    for r in followers:
        if r in rows and rows[r][1] == CONTRADICTION:
            return CONTRADICTION, r, rows[r][0]
    waiting = [r for r in followers if r not in rows or rows[r][1] == PENDING]
    if waiting:
        return PENDING, min(_sure(rows.get(r)) for r in followers), sum(1 << r for r in waiting)
    return COMPLETE, min(presence(*rows[r]) for r in followers), 0  # type: ignore[type-var]


@dataclass(frozen=True)
class Verdict:
    action: str  # admit | defer | clamp | contradiction
    prefix: int = 0
    why: str = ""


def decide(want: int, folded: tuple[int, int, int] | None, world: int, expired: bool) -> Verdict:
    """Rank 0's admission of one rid; `folded` is None until a lap brought its numbers."""
    if folded is None:  # nobody spoke yet: every follower is silent
        folded = (PENDING, 0, sum(1 << r for r in range(1, world)))
    state, a, b = folded
    if state == CONTRADICTION:  # before the want <= 0 early-out: a peer measured it
        return Verdict("contradiction", 0, f"rank{a} load terminated short (matched {b})")
    if want <= 0:
        return Verdict("admit", max(want, 0))
    if state == PENDING:
        ranks = [r for r in range(1, world) if b >> r & 1]
        if not expired:
            return Verdict("defer", 0, f"waiting on ranks {ranks}")
        # the bound ran out: tell only what every rank certainly holds
        return Verdict("clamp", min(want, a), f"bound expired waiting on ranks {ranks}")
    if a >= want:
        return Verdict("admit", want)
    return Verdict("clamp", a, f"group floor {a} < want {want}")


def query_code(rid: int, owed: bool) -> int:
    """The rid rank 0 asks about this pass (-1: none) and whether it will block on the lap,
    as one header integer of the decision."""
    return (rid + 1) * 2 + int(owed)


def read_query(code: int) -> tuple[int, bool]:
    return code // 2 - 1, bool(code & 1)


@dataclass
class Carrier:
    """Rank 0's folded table (absorbed laps) and a follower's stamps."""

    rank: int
    world: int
    bound_s: float
    table: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    first_defer: dict[int, float] = field(default_factory=dict)
    loads: dict[int, tuple[tuple[int, ...], int, int]] = field(default_factory=dict)
    n: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("prefetch_deferred", "prefetch_clamped", "prefetch_floor_admits", "stamps"), 0
        )
    )

    owe: int = -1  # rank 0: the pass whose lap it will read blocking (nothing in flight)

    # -- rank 0 -----------------------------------------------------------------------------
    def query(self, pass_id: int) -> int:
        """Which deferred rid this pass's decision asks the followers about (round robin)."""
        waiting = sorted(self.first_defer)
        return waiting[pass_id % len(waiting)] if waiting else -1

    def absorb(self, aux: tuple[int, ...]) -> None:
        rid, state, a, b = (int(x) for x in aux[:4])
        if rid >= 0:
            self.table[rid] = (state, a, b)

    def admit(self, rid: int, want: int, now: float) -> Verdict:
        first = self.first_defer.setdefault(rid, now)
        v = decide(want, self.table.get(rid), self.world, now - first >= self.bound_s)
        if v.action == "defer":
            self.n["prefetch_deferred"] += 1
            return v
        self.forget(rid)
        if v.action == "clamp":
            self.n["prefetch_clamped"] += 1
        elif v.action == "admit" and want > 0:
            self.n["prefetch_floor_admits"] += 1
        return v

    def forget(self, rid: int) -> None:
        """Admitted: the next admission of this rid (after a void) needs fresh numbers."""
        self.table.pop(rid, None)
        self.first_defer.pop(rid, None)

    # -- followers --------------------------------------------------------------------------
    def stamp(self, sched, rid: int) -> list[list[int]]:
        """This follower's row for the rid rank 0 asks about: looking it up starts its
        load-back here too (the log's same re-admission prefetch on every rank)."""
        req = sched.reqs.get(rid)
        if req is None or req is sched.chunked or req not in sched.waiting:
            return []  # nothing to prefetch for it here: silent, never a zero
        self.n["stamps"] += 1
        return [[self.rank, rid, *self.measure(sched.cache, req)]]

    def measure(self, cache, req) -> tuple[int, int]:
        local, matched = cache.match(req.tokens), cache.tree_match(req.tokens)
        host, key = cache.host, tuple(req.tokens[: matched + 1])
        if local < 0:
            if req.rid not in self.loads:
                e = host.loading.get(key) if host is not None else None
                self.loads[req.rid] = (key, matched, len(e.path) if e is not None else matched)
            return self.loads[req.rid][1], PENDING
        began = self.loads.get(req.rid)
        if began is None:
            return local, 0
        k, base, expected = began
        if host is not None and (k in host.loading or k in host.entries):
            del self.loads[req.rid]  # given back to the host (admissions first): not terminated
            return local, 0
        if local < expected:  # landed and gone (or dropped on landing): short of its begin
            return base, CONTRADICTION
        return base, local - base


# -- wiring (decision.py calls these; the layout is the config's, the same on every rank) ------
def carrier_for(ctx, forwarded: bool) -> Carrier | None:
    """A carrier when it can mean something: forwarded execution, pp >= 2, a host tier."""
    cfg = ctx.cfg
    a = cfg.engine.admission
    # Stub configs (unit tests) may lack the kv section: no host tier, no carrier.
    host_tier = bool(getattr(getattr(cfg.engine, "kv", None), "host_tier", False))
    on = getattr(a, "prefetch_floor", "group") == "group" and host_tier
    if not (on and forwarded and ctx.world > 1):
        return None
    return Carrier(ctx.rank, ctx.world, float(getattr(a, "prefetch_bound_ms", 1000.0)) / 1e3)


def stamped(msg, rows: list[list[int]], has_entries: bool):
    """The decision with this follower's rows appended to the carrier tensor (after the
    entries; absent until the first follower stamps); a new message, never the upstream's."""
    keep = 1 if has_entries else 0
    old = msg.tensors[keep:] or [torch.zeros((0, 4), dtype=torch.int64)]
    new = torch.cat([old[0], torch.tensor(rows, dtype=torch.int64).reshape(-1, 4)])
    tensors = [*msg.tensors[:keep], new] if new.numel() or len(msg.tensors) > keep else msg.tensors
    return dataclasses.replace(msg, tensors=tensors)


def lap_aux(msg, carrier: Carrier, has_entries: bool) -> tuple[int, ...]:
    """The last rank folds every follower's row into the lap's header (no payload: the lap
    completes when rank 0 reads it, as before the carrier)."""
    rid, _ = read_query(msg.aux[3])
    keep = 1 if has_entries else 0
    rows = msg.tensors[keep].tolist() if len(msg.tensors) > keep else []
    mine = {int(r[0]): (int(r[2]), int(r[3])) for r in rows if int(r[1]) == rid}
    return (rid, *fold(mine, list(range(1, carrier.world))))


def validate(merged) -> None:
    """Raises ValueError (one line) where the historical `rank0` cannot differ from `group`
    (the default `group` is inert there: nothing is carried)."""
    a, kv, pp = merged.engine.admission, merged.engine.kv, int(merged.pp)
    floor = getattr(a, "prefetch_floor", "group")
    if floor not in FLOORS:
        raise ValueError(f"engine.admission.prefetch_floor={floor!r}: {' | '.join(FLOORS)}")
    if float(getattr(a, "prefetch_bound_ms", 1000.0)) < 0:
        raise ValueError(f"engine.admission.prefetch_bound_ms={a.prefetch_bound_ms}: >= 0")
    if floor == "group":
        return
    if pp < 2:
        raise ValueError(
            f"engine.admission.prefetch_floor={floor} means nothing at pp={pp}: no peer's "
            "prefetch can complete later than rank 0's"
        )
    if not kv.host_tier:
        raise ValueError(
            f"engine.admission.prefetch_floor={floor} needs engine.kv.host_tier=true: "
            "without a host tier no rank prefetches"
        )
    if a.name not in ("forwarded", "row_authority"):
        raise ValueError(
            f"engine.admission.prefetch_floor={floor} is a design of forwarded execution "
            f"(engine/admission=forwarded or row_authority); engine/admission={a.name} "
            + (
                "retracts a pending prefetch and the guard defers it (#944)"
                if a.name == "decision"
                else "has no told row"
            )
        )


def admit_on_floor(ctx, carrier: Carrier, rid: int, want: int) -> int | None:
    """Rank 0 (the policy's clamp): the prefix to tell for `rid`, or None to defer it."""
    now = ctx.t.now()
    v = carrier.admit(rid, want, now)
    if v.action == "contradiction":  # once: the stop ends the run
        ctx.stop(f"prefetch floor contradiction (#1176): rid={rid} {v.why}")
    if v.action == "defer":
        if carrier.first_defer.get(rid) == now:  # named once per deferral episode
            ctx.events.emit("prefetch_defer", -1, -1, rid, ctx.epoch, f"want={want} {v.why}")
        return None
    if v.action == "clamp":
        detail = f"want={want} told={v.prefix} {v.why}"
        ctx.events.emit("prefetch_clamp", -1, -1, rid, ctx.epoch, detail)
    carrier.forget(rid)
    return v.prefix
