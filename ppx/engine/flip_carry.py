"""flip.continuation=survive: the continuations a cutover carries un-retracted, their KV
re-laid out for the new plan (engine/carry.py) and, under oracle.carry_check, compared with
what the single-process reference writes for the same tokens (engine/carry_check.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.engine.carry import carry
from ppx.engine.carry_check import CarryCheck
from ppx.protocol.continuations import Cutover

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.engine.cache.kv import KVCache
    from ppx.engine.context import RankContext
    from ppx.protocol.registry import Protocol


class CarryOver:
    def __init__(self, ctx: RankContext, proto: Protocol) -> None:
        self.ctx = ctx
        self.continuation = proto.of(Cutover)  # flip.continuation: re-queue or carry
        self.check: CarryCheck | None = None  # oracle.carry_check, built at the first carry

    @property
    def survives(self) -> bool:
        return self.continuation.survives

    def carry(
        self, pass_id: int, old_cache: KVCache, carried: list[Req], pointer: Req | None, target: str
    ) -> None:
        """The cells take the carried continuations in order, the pointer's first; a one-slot
        plan (TP) has one cell, and the others stay resident with no cell (the state
        sgl-project#959's assert found)."""
        s, ctx = self.ctx.sched, self.ctx
        carry(ctx, old_cache, carried, target, pass_id)
        if ctx.cfg.oracle.carry_check:
            if self.check is None:
                self.check = CarryCheck(ctx.cfg, ctx.rank, ctx.world)
            for req in carried:
                wrong = self.check.first_difference(s.cache, req, target)
                if wrong is not None:
                    ctx.stop(wrong)
        first = pointer if pointer is not None and pointer in carried else carried[0]
        order = [first] + [r for r in carried if r is not first]
        s.seat_carried(order)
        self.continuation.carried += len(carried)
        ctx.events.emit(
            "flip_carry",
            pass_id,
            -1,
            first.rid,
            ctx.epoch,
            f"{[(r.rid, r.computed) for r in order]} carried into {target}; cells "
            f"{[r.rid if r else -1 for r in s.cells] if s.per_slot else [first.rid]}",
        )
