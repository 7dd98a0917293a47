"""The group's prefetch completion floor (sgl-project#1175/#1176): the carrier's numbers.

How rank 0 learns the group's completion without a collective: see
ppx/protocol/prefetch_floor.py for the switch and its two designs.

#1176: presence is `matched + loaded` (the sum, never the max), and a follower whose load
terminated short of what it began reports a CONTRADICTION on the same carrier; rank 0 stops the
group once, naming the peer (read before the `want <= 0` early-out). The carrier is active for
forwarded execution (`forwarded`, `row_authority`) at pp >= 2 with a host tier; `decision`
retracts on a pending load and the guard defers it (#944), a design of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ppx.core import Kind
from ppx.header import declare

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.protocol.views import CacheView, SchedulerView

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


def _terminated(row: tuple[int, int]) -> int:
    """The presence of a row known to be neither PENDING nor CONTRADICTION (fold checked)."""
    p = presence(*row)
    assert p is not None, f"row {row} folded as terminated but carries a sentinel"
    return p


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
    return COMPLETE, min(_terminated(rows[r]) for r in followers), 0


@dataclass(frozen=True)
class Verdict:
    action: str  # admit | defer | clamp | contradiction
    prefix: int = 0
    why: str = ""


def decide(
    want: int,
    folded: tuple[int, int, int] | None,
    world: int,
    expired: bool,
    short_defers: bool = False,
) -> Verdict:
    """Rank 0's admission of one rid; `folded` is None until a lap brought its numbers.
    `short_defers` (engine.admission.prefetch.short=defer): a COMPLETE floor below `want`
    waits for the bound like a pending one."""
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
    if short_defers and not expired:
        return Verdict("defer", 0, f"group floor {a} < want {want}")
    return Verdict("clamp", a, f"group floor {a} < want {want}")


# the decision's fourth word: the rid rank 0 asks the followers about (#1175)
FLOOR_QUERY = declare(Kind.DECISION, "floor_query", "engine.admission.prefetch.floor")


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
    short_defers: bool = False  # engine.admission.prefetch.short=defer (the fork's #1175)

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
        expired = now - first >= self.bound_s
        v = decide(want, self.table.get(rid), self.world, expired, self.short_defers)
        if v.action == "defer":
            self.n["prefetch_deferred"] += 1
            return v
        self.forget(rid)
        if v.action == "clamp":
            self.n["prefetch_clamped"] += 1
        elif v.action == "admit" and want > 0:
            self.n["prefetch_floor_admits"] += 1
        return v

    def reset(self) -> None:
        """A cutover: the layout and the host tier change, so every number rank 0 folded and
        every load a follower began belong to the old layout. A deferral's clock is the rid's
        (how long it has waited, whatever the layout): it keeps running, so the bound still
        clamps a rid whose loads a flip keeps restarting."""
        self.table.clear()
        self.loads.clear()
        self.owe = -1

    def forget(self, rid: int) -> None:
        """Admitted: the next admission of this rid (after a void) needs fresh numbers."""
        self.table.pop(rid, None)
        self.first_defer.pop(rid, None)

    # -- followers --------------------------------------------------------------------------
    def stamp(self, sched: SchedulerView, rid: int) -> list[list[int]]:
        """This follower's row for the rid rank 0 asks about: looking it up starts its
        load-back here too (the log's same re-admission prefetch on every rank)."""
        req = sched.reqs.get(rid)
        if req is None or req is sched.chunked or req not in sched.waiting:
            return []  # nothing to prefetch for it here: silent, never a zero
        self.n["stamps"] += 1
        return [[self.rank, rid, *self.measure(sched.cache, req)]]

    def measure(self, cache: CacheView, req: Req) -> tuple[int, int]:
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
