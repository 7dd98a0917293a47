"""Applying a slot's result: tokens appended, finished requests released and streamed.

Shared by the PP phase's output ring (loop.py) and the TP phase (tp_phase.py): the return path
absorbs a void first; otherwise the output must be the one this rank expects for the slot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.core import Message, SlotBatch
from ppx.engine.board import F
from ppx.engine.faults.base import Carry

if TYPE_CHECKING:
    from ppx.engine.admission.seams import Seams
    from ppx.engine.context import RankContext
    from ppx.engine.intake import Intake


class Results:
    def __init__(
        self,
        ctx: RankContext,
        seams: Seams,
        intake: Intake | None,
        carry: Carry | None = None,
    ) -> None:
        self.ctx, self.intake = ctx, intake
        self.returns, self.admission = seams.returns, seams.admission
        self.carry = carry or Carry()  # faults.retract (rank 0), else inert

    def apply(self, slot: int, batch: SlotBatch, msg: Message, p) -> None:
        ctx = self.ctx
        if batch.flip_void:  # flip.inflight=void: the slot's results are dropped, re-queued
            ctx.sched.void(batch)
            batch.flip_voided = True  # what the cutover checks (FlipControl.check_voided)
            return
        if self.returns.absorb(slot, batch, msg, p):
            return
        tokens = msg.tensors[0].tolist() if msg.tensors else []
        finals = sum(e.final for e in batch.entries)
        if len(tokens) != finals or msg.pass_id != batch.pass_id:
            ctx.stop(
                f"output mismatch: rank{ctx.rank} slot={slot} got pass={msg.pass_id} "
                f"width={len(tokens)} vs local pass={batch.pass_id} finals={finals}",
                p,
            )
        done = ctx.sched.apply_output(slot, tokens)
        ctx.board.add(F.TOKENS, len(done))
        for req, tok in done:
            if req.finished:
                ctx.board.add(F.FINISHED)
                self.admission.on_served(req.rid)
                ctx.events.emit(
                    "finish",
                    p.pass_id if p else -1,
                    slot,
                    req.rid,
                    ctx.epoch,
                    f"cached={req.cached}",
                )
            if self.intake is not None:
                self.intake.token(req.rid, tok, req.finished, req.cached)
        self.carry.after_output(ctx.sched, done)
