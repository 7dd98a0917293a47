"""The seams of one rank, built together because they share state (decision_parts.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ppx.engine.admission.base import Admission, ReturnPath
from ppx.engine.admission.cutover import CutoverSeam
from ppx.engine.admission.prefill import LocalPrefill, Offer
from ppx.engine.admission.tp_floor import TPFloor
from ppx.protocol.continuations import SecondContinuation
from ppx.protocol.policy import Policy as PolicyDesign
from ppx.protocol.prefetch_floor import PrefetchFloor
from ppx.protocol.prefetch_short import PrefetchShort
from ppx.protocol.told_scope import ToldScope

if TYPE_CHECKING:
    from ppx.engine.context import RankContext
    from ppx.protocol.registry import Protocol


@dataclass
class Seams:
    admission: Admission  # loop.py: the schedule and decision steps
    returns: ReturnPath  # loop.py's output and lap steps, results.py, the TP phase's voids
    cutover: CutoverSeam  # flip.py
    floor: TPFloor  # tp_phase.py
    prefill: LocalPrefill  # the TP phase's rank 0, and the admission's own

    def counters(self) -> dict[str, int]:
        return self.admission.counters()


def make_seams(ctx: RankContext, proto: Protocol) -> Seams:
    design = proto.of(PolicyDesign)
    floor_design = proto.of(PrefetchFloor)
    # engine.admission.prefetch.floor=group (#1175): the per-rid completion carrier, where a
    # design executes forwarded rows (elsewhere None: nothing is carried)
    carrier = floor_design.carrier(ctx.rank, ctx.world, design.executes)
    if carrier is not None:  # a floor that completed short: clamp, or wait the bound
        carrier.short_defers = proto.of(PrefetchShort).defers
    floor = TPFloor(ctx, floor_design, carrier)
    cutover = CutoverSeam(ctx, proto.of(ToldScope), carrier)
    second = proto.of(SecondContinuation)
    if not design.decides:
        from ppx.engine.admission.rank_local import RankLocal

        prefill = LocalPrefill(ctx, Offer(ctx), second)
        return Seams(RankLocal(ctx, prefill), ReturnPath(), cutover, floor, prefill)
    from ppx.engine.admission.decision import DecisionAdmission
    from ppx.engine.admission.decision_parts import DecisionOffer, decision_parts
    from ppx.engine.admission.returns import DecisionReturn

    parts = decision_parts(ctx, proto, carrier)
    prefill = LocalPrefill(ctx, DecisionOffer(ctx, parts, floor), second)
    admission = DecisionAdmission(ctx, proto, prefill, parts)
    return Seams(admission, DecisionReturn(ctx, parts), cutover, floor, prefill)
