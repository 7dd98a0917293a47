"""What a decision design's seams share on one rank, built once: the guard, the #1175
carrier, the offer fault, the designs the config chose, and the counters (one tally, so a
retraction counted by the follower and a void counted by the return path land in one dict).
Also the design's `Offer`: rank 0's match and the guard's clamp."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ppx.engine.admission.prefill import Offer
from ppx.engine.faults.base import Readiness
from ppx.protocol import prefetch_floor as pf
from ppx.protocol.guard.defer_streak import DeferStreak
from ppx.protocol.guard.floors import Floors
from ppx.protocol.guard.guard import Guard
from ppx.protocol.guard.prefix_clear import PrefixClear
from ppx.protocol.guard.unit import GuardUnit
from ppx.protocol.load_back import LoadBack
from ppx.protocol.reconcile import Reconcile
from ppx.protocol.told_scope import ToldScope
from ppx.protocol.void import VoidMode

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.engine.admission.tp_floor import TPFloor
    from ppx.engine.context import RankContext
    from ppx.protocol.prefetch_carrier import Carrier
    from ppx.protocol.registry import Protocol


@dataclass
class DecisionParts:
    guard: Guard
    carrier: Carrier | None
    offer: Readiness  # faults.offer_flap.tokens (rank 0 only), else inert
    load_back: LoadBack
    told_rows: ToldScope
    voids: VoidMode
    n: dict[str, int]  # retractions, refusals, voids, stops

    def counters(self) -> dict[str, int]:
        carried = self.carrier.n if self.carrier is not None else {}
        return {**self.n, **carried, **self.guard.counters()}


def decision_parts(ctx: RankContext, proto: Protocol, carrier: Carrier | None) -> DecisionParts:
    unit = proto.of(GuardUnit)
    escalate = Escalation(ctx, proto.of(Reconcile), unit.name, int(ctx.cfg.engine.guard.defer_cap))
    guard = Guard(
        proto.of(Floors),
        proto.of(DeferStreak),
        proto.of(PrefixClear),
        escalate.defer_cap,
        on_escalate=escalate,
        unit=unit,
    )
    return DecisionParts(
        guard=guard,
        carrier=carrier,
        offer=ctx.faults.readiness,
        load_back=proto.of(LoadBack),
        told_rows=proto.of(ToldScope),
        voids=proto.of(VoidMode),
        n={"retractions": 0, "refusals": 0, "voids": 0, "stops": 0},
    )


class Escalation:
    """The defer cap ran out for a rid: its next offer is told=0 (sgl-project#944). Named
    once per rid, with where the followers looked for it: the rank that observes the miss is
    never the rank that acts on it, so the line must say what was searched."""

    def __init__(self, ctx: RankContext, lookup: Reconcile, unit: str, defer_cap: int) -> None:
        self.ctx, self.lookup, self.unit, self.defer_cap = ctx, lookup, unit, defer_cap

    def __call__(self, rid: int, count: int) -> None:
        msg = (
            f"escalation rid={rid} (#944 UNRESOLVABLE): unresolved in {count} {self.unit}, "
            f"engine.guard.defer_cap={self.defer_cap} reached; the followers looked in "
            f"the {self.lookup.where()}; next told=0"
        )
        print(f"ppx warning: {msg}", file=sys.stderr)
        self.ctx.events.emit("escalation", -1, -1, rid, self.ctx.epoch, msg)


class DecisionOffer(Offer):
    """Rank 0 of a decision design: its match through the load-back design and the offer
    fault, clamped by the guard and (where it governs this phase) the #1175 group floor."""

    def __init__(self, ctx: RankContext, parts: DecisionParts, floor: TPFloor) -> None:
        super().__init__(ctx)
        self.parts, self.floor = parts, floor

    def match(self, req: Req) -> int:
        parts = self.parts
        return parts.offer.offer(req.rid, parts.load_back.match(self.ctx.sched.cache, req))

    def clamp(self, req: Req, local: int) -> int | None:
        want = self.parts.guard.clamp(req.rid, req.tokens, local)
        carrier = self.parts.carrier
        if want is None or carrier is None or not self.floor.here():
            return want
        return pf.admit_on_floor(self.ctx, carrier, req.rid, want)  # #1175
