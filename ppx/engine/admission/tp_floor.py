"""The #1175 floor in the TP phase (held by tp_phase.py): rank 0 names one deferred rid in
the pass header, every rank writes its completion row into one all-reduced tensor, rank 0
folds it as the last rank folds the lap in the PP phase. Inert without a carrier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.protocol import prefetch_floor as pf

if TYPE_CHECKING:
    import torch

    from ppx.engine.context import RankContext
    from ppx.protocol.prefetch_carrier import Carrier
    from ppx.protocol.prefetch_floor import PrefetchFloor


class TPFloor:
    def __init__(self, ctx: RankContext, floor: PrefetchFloor, carrier: Carrier | None) -> None:
        self.ctx, self.floor, self.carrier = ctx, floor, carrier

    def here(self) -> bool:
        """Does the group floor govern this phase's admissions? (group_pp: the PP phase only)"""
        return self.carrier is not None and (self.ctx.phase == "pp" or self.floor.in_tp_phase)

    def query(self, pass_id: int) -> int:
        """Rank 0, a TP pass: the rid whose group prefetch completion it asks about (-1: none)."""
        if self.carrier is None or not self.here():
            return -1
        return self.carrier.query(pass_id)

    def rows(self, rid: int) -> torch.Tensor:
        """This rank's row of the all-reduced completion tensor for `rid`."""
        assert self.carrier is not None, "the header asked about a rid: a carrier exists"
        return pf.tp_row(self.carrier, self.ctx.sched, rid, self.ctx.world)

    def absorb(self, rid: int, rows: torch.Tensor) -> None:
        """Rank 0: the all-reduced completion rows for `rid`."""
        assert self.carrier is not None, "the header asked about a rid: a carrier exists"
        pf.tp_absorb(self.carrier, rid, rows)
