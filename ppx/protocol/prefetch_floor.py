"""`engine.admission.prefetch.floor`: whose prefetch completion rank 0 admits a prefix on
(sgl-project#1175/#1176).

- `group` (default, #1175): rank 0 names one deferred rid per pass on its decision (round
  robin); every follower stamps `[rank, rid, matched, loaded]` for it on the decision as it
  passes (looking it up starts that rank's load-back too), and the last rank folds the rows
  into the header of the lap back to rank 0 (no payload: the lap completes when rank 0 reads
  it, where it reads the wire anyway; with nothing in flight the decision says rank 0 owes a
  blocking read of that lap). Rank 0 admits `want` only when the group floor covers it. A
  follower that is silent, or whose load-back is still running, contributes NO number
  (PENDING, never a zero): the rid is deferred by name while other work proceeds. When the
  bound (`engine.admission.prefetch.bound_ms`, rank 0's clock) expires, rank 0 clamps to what
  the group certainly holds instead of over-telling. `want <= 0` admits unconditionally.
  In the TP phase (a flipping run) the same question rides the pass's broadcast: rank 0 names
  the rid in the header, every follower writes its row into one all-reduced tensor (the TP
  phase all-reduces each pass's observations anyway), rank 0 folds it as the last rank folds
  the lap. A cutover resets the carrier on every rank: the layout and the host tier change, so
  a load a follower began, and a number rank 0 folded, belong to the old layout (a record that
  survived the cutover read the new tree as a load that terminated short: a false #1176
  contradiction).
- `group_pp` (ppx before issue 26; the log's carrier rode the PP ring lap, its TP-phase group
  facts came later, #1203): the floor in the PP phase only; the TP phase admits on rank 0's own
  completion, and a follower whose load is pending voids the TP pass until the void bound.
- `rank0` (the log before #1175): rank 0 admits on its own, rank-local prefetch completion
  ("completed_synced" was a MIN reduce under tp > 1 only, never across PP ranks); a follower
  whose load has not landed cannot execute the forwarded row.

The carrier is active for forwarded execution (`forwarded`, `row_authority`) at pp >= 2 with a
host tier; `decision` retracts on a pending load and the guard defers it (#944), a design of
its own. The carrier's numbers: ppx/protocol/prefetch_carrier.py.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from ppx.protocol.axis import Axis, Counter, Param, Variant
from ppx.protocol.policy import policy_of
from ppx.protocol.prefetch_carrier import FLOOR_QUERY, Carrier, fold, read_query

if TYPE_CHECKING:
    from ppx.protocol.views import RankView, SchedulerView

AXIS = Axis(
    "engine.admission.prefetch.floor",
    "prefetch_floor",
    "whose prefetch completion rank 0 admits a prefix on",
    default="group",
    counters=(
        Counter("prefetch_deferred"),  # a rid deferred on the group's completion floor
        Counter("prefetch_clamped"),  # clamped to the floor (bound expired / floor short)
        Counter("prefetch_floor_admits"),  # admitted because the floor covered the want
    ),
    params=(Param("engine.admission.prefetch.bound_ms", "prefetch_bound_ms"),),
)


class PrefetchFloor(Variant):
    axis = AXIS
    in_tp_phase = False  # the floor also governs the TP phase's admissions

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        bound = float(cfg.engine.admission.prefetch.bound_ms)
        if bound < 0:
            return f"engine.admission.prefetch.bound_ms={bound}: >= 0"
        return None

    def carrier(self, rank: int, world: int, executes: bool) -> Carrier | None:
        return None


class Group(PrefetchFloor):
    name = "group"
    ref = "sgl-project#1175/#1176"
    about = (
        "rank 0 admits on the group's completion floor, carried on the decision and the lap "
        "(in the TP phase on the pass's all-reduce)"
    )
    in_tp_phase = True

    def carrier(self, rank: int, world: int, executes: bool) -> Carrier | None:
        """A carrier where it can mean something: forwarded execution, pp >= 2, a host tier
        (elsewhere the default is inert: nothing is carried)."""
        if not (self.cfg.engine.kv.host_tier and executes and world > 1):
            return None
        return Carrier(rank, world, float(self.cfg.engine.admission.prefetch.bound_ms) / 1e3)


class GroupPP(Group):
    name = "group_pp"
    ref = "sgl-project#1175 on the PP ring lap only (the TP-phase group facts: #1203)"
    about = "the group floor in the PP phase only; the TP phase admits on rank 0's own completion"
    in_tp_phase = False

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        why = Rank0.refuse(cfg)
        if why is not None:
            return why.replace(Rank0.switch(), cls.switch())
        if not cfg.flip.enabled:
            return f"{cls.switch()} differs from group only in a flip's TP phase (set flip=...)"
        return None


class Rank0(PrefetchFloor):
    name = "rank0"
    ref = "before sgl-project#1175 (boot weg1b5)"
    about = "rank 0 admits on its own, rank-local prefetch completion"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if (why := super().refuse(cfg)) is not None:
            return why
        if int(cfg.pp) < 2:
            return (
                f"{cls.switch()} means nothing at pp={cfg.pp}: no peer's prefetch can complete "
                "later than rank 0's"
            )
        if not cfg.engine.kv.host_tier:
            return (
                f"{cls.switch()} needs engine.kv.host_tier=true: without a host tier no "
                "rank prefetches"
            )
        p = policy_of(cfg)
        if not p.executes:
            why = (
                "retracts a pending prefetch and the guard defers it (#944)"
                if p.decides
                else "has no told row"
            )
            return (
                f"{cls.switch()} is a design of forwarded execution (engine/admission=forwarded "
                f"or row_authority); engine/admission={p.name} {why}"
            )
        return None


# -- wiring (the decision policy calls these; the layout is the config's, the same everywhere)
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
    rid, _ = read_query(FLOOR_QUERY.of(msg))
    keep = 1 if has_entries else 0
    rows = msg.tensors[keep].tolist() if len(msg.tensors) > keep else []
    mine = {int(r[0]): (int(r[2]), int(r[3])) for r in rows if int(r[1]) == rid}
    return (rid, *fold(mine, list(range(1, carrier.world))))


def tp_row(carrier: Carrier, sched: SchedulerView, rid: int, world: int) -> torch.Tensor:
    """The TP phase: this rank's row for the rid rank 0 named in the pass header, in the
    (world, 4) tensor every rank all-reduces. A follower writes only its own row; rank 0 and a
    silent follower leave theirs zero, and the fold reads a row only where its first column
    names its rank, so a zero row is silence, never a number."""
    rows = torch.zeros((world, 4), dtype=torch.int64)
    if carrier.rank > 0:
        for row in carrier.stamp(sched, rid):
            rows[carrier.rank] = torch.tensor(row, dtype=torch.int64)
    return rows


def tp_absorb(carrier: Carrier, rid: int, rows: torch.Tensor) -> None:
    """Rank 0 folds the all-reduced rows as the last rank folds the lap."""
    mine = {
        r: (int(row[2]), int(row[3]))
        for r, row in enumerate(rows.tolist())
        if r > 0 and row[0] == r and row[1] == rid
    }
    carrier.absorb((rid, *fold(mine, list(range(1, carrier.world)))))


def admit_on_floor(ctx: RankView, carrier: Carrier, rid: int, want: int) -> int | None:
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
