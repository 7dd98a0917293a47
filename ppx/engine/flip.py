"""Phase flip: TP <-> PP cutovers under load, with epochs.

Rank 0 decides a flip from the schedule and announces it in-band (on the chain in the PP
phase, in the batch broadcast in the TP phase), so every rank sees it at the same pass. The
cutover: stop admitting, drain (or void) the slots in flight, retract the residents to the
waiting queue keeping their generated tokens, release the KV (the layout changes), switch
the execution plan, re-admit the residents, advance the epoch, check that every rank holds the
same epoch (a desync is a named stop), resume.

What the flip does with the slots in flight, when the epoch moves and what crosses the TP->PP
seam are designs (`flip.inflight`, `flip.epoch_advance`, `flip.seam_tail`:
ppx/protocol/flip.py); this file runs the cutover they shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Protocol as TypingProtocol

import torch

from ppx.engine.board import F, Op
from ppx.engine.flip_carry import CarryOver
from ppx.engine.flip_schedule import FlipSchedule
from ppx.protocol.flip import EpochAdvance, Inflight, SeamTail

if TYPE_CHECKING:
    from ppx.core import SlotBatch
    from ppx.engine.admission.cutover import CutoverSeam
    from ppx.engine.context import RankContext
    from ppx.protocol.registry import Protocol

PHASES = ("pp", "tp")


class PlanSwitch(TypingProtocol):
    """What the cutover asks of the rank's planner (engine/plan.py)."""

    def switch(self, phase: str) -> None: ...


class FlipControl:
    def __init__(
        self, ctx: RankContext, planner: PlanSwitch, proto: Protocol, seam: CutoverSeam
    ) -> None:
        self.ctx, self.planner = ctx, planner
        self.seam = seam  # what the admission designs release and re-admit at a cutover
        self.schedule = FlipSchedule(ctx, proto)  # rank 0: when the next flip is due
        self.inflight = proto.of(Inflight)
        self.epochs = Epochs(ctx, proto)
        self.tail = SeamCrossing(ctx, proto)
        self.carry = CarryOver(ctx, proto)
        self.announced_pass: int | None = None  # a cutover is under way since this pass
        self.announced_t = 0.0
        self.cutover_ms: list[float] = []
        self.retracted = 0
        self.flip_voided = 0  # batches in flight that a void-mode flip voided, over the run
        self.to_void: list[SlotBatch] = []  # in flight at this flip's void-mode announcement
        self.reprefill_tokens = 0

    @property
    def draining(self) -> bool:
        return self.announced_pass is not None

    def due(self, pass_id: int, arrived: bool) -> bool:
        """Rank 0: is a flip due at this pass, which took requests if `arrived`?
        (flip_schedule.py)"""
        return self.schedule.due(pass_id, self.draining, arrived)

    def note_tp_batch(self, rids: list[int]) -> None:
        """The TP phase sampled a token for each of `rids` (every rank applied the same ones)."""
        self.tail.tp_tail = rids

    def announce(self, pass_id: int) -> None:
        """Every rank, at the pass whose chain carries the flip: stop admitting; in `void`
        mode the slots in flight will come back as voids."""
        ctx = self.ctx
        self.announced_pass, self.announced_t = pass_id, self.schedule.clock()
        ctx.sched.pause()
        if self.inflight.voids_inflight:
            self.to_void = [b for b in ctx.sched.inflight if b is not None]
            for b in ctx.sched.inflight:
                if b is not None:
                    b.flip_void = True
        ctx.events.emit(
            "flip_start",
            pass_id,
            -1,
            -1,
            ctx.epoch,
            f"{ctx.phase}->{self.target} {self.inflight.name}",
        )

    @property
    def target(self) -> str:
        return "tp" if self.ctx.phase == "pp" else "pp"

    def cutover_pass(self) -> int:
        """Outputs of batches launched before the announcement are back, and relayed, S - 1
        passes later on every rank; the cutover happens at the end of that pass."""
        assert self.announced_pass is not None, "asked only while draining"
        return self.announced_pass + self.ctx.num_slots - 1

    def cutover(self, pass_id: int) -> None:
        ctx = self.ctx
        s = ctx.sched
        assert s.num_inflight == 0, f"rank{ctx.rank}: cutover with {s.num_inflight} slots in flight"
        self.check_voided(pass_id)
        # every request mid-prefill: the continuations the pointer and the cells name, and any
        # a void parked outside them (engine.admission.void=keep)
        mid = s.continuations() + s.strays()
        carried = mid if self.carry.survives else []
        residents = [r for slot in s.running for r in slot]
        residents += [r for r in mid if r not in carried]
        pointer, old_cache = s.chunked, s.cache
        # the churn reads how far each resident had got: before the re-queue resets it
        self.schedule.churn.cutover(pass_id, residents)
        for req in residents:
            self.reprefill_tokens += req.computed
            s.requeue(req)  # generated tokens are kept; the KV is about to be released
        self.retracted += len(residents)
        if self.target == "pp":
            self.tail.cross(pass_id, residents)
        if s.cache.host is not None:  # the released tree goes to the host tier of this layout
            s.cache.tree.evict(s.cache.tree.size, s.cache.host.save)
        self.seam.released()
        target = self.target
        if self.epochs.advance_at_release:
            self.epochs.advance(self.schedule.flips)
        self.planner.switch(target)
        if carried:
            self.carry.carry(pass_id, old_cache, carried, pointer, target)
        # the re-admission into the new layout's queue, where the log applied the told row
        # (`_add_request_to_queue`)
        for req in residents:
            self.seam.readmit(req)
        if not self.epochs.advance_at_release:
            self.epochs.advance(self.schedule.flips)
        self.epochs.check(pass_id)
        ms = (self.schedule.clock() - self.announced_t) * 1e3
        self.cutover_ms.append(ms)
        self.schedule.cut_over(pass_id)
        self.announced_pass = None
        ctx.board.set(F.FLIPS, self.schedule.flips)
        ctx.board.set(F.EPOCH, ctx.epoch)
        ctx.board.set(F.PHASE, PHASES.index(target))
        ctx.events.emit(
            "flip_end",
            pass_id,
            -1,
            -1,
            ctx.epoch,
            f"now {target}; cutover_ms={ms:.1f} retracted={len(residents)}",
        )

    def check_voided(self, pass_id: int) -> None:
        """flip.inflight=void: each batch in flight at the announcement came back before the
        cutover (the assert above) and was voided (Results marks it); one that finished ran
        the flip as `drain`, so the run would be served with the design it names never run."""
        kept = [b.pass_id for b in self.to_void if not b.flip_voided]
        self.flip_voided += len(self.to_void) - len(kept)
        self.to_void = []
        if kept:
            self.ctx.stop(
                f"flip void: {len(kept)} of the batches in flight at the announcement "
                f"(pass {self.announced_pass}) were not voided by the cutover (pass {pass_id})"
            )

    def counters(self) -> dict:
        ms = sorted(self.cutover_ms)
        return {
            "flips": self.schedule.flips,
            "retracted_at_flip": self.retracted,
            "reprefill_tokens": self.reprefill_tokens,
            "flip_voided": self.flip_voided,
            "seam_tails_lost": self.tail.lost,
            "flips_deferred": self.schedule.deferred,
            "readmits": self.schedule.churn.readmits,
            "cutover_ms": [round(x, 3) for x in ms],
        }


class Epochs:
    """The epoch a cutover advances (before or after the re-admission: flip.epoch_advance),
    and the all-gather that checks every rank holds the same one (a desync is a named stop)."""

    def __init__(self, ctx: RankContext, proto: Protocol) -> None:
        self.ctx = ctx
        self.advance_at_release = proto.of(EpochAdvance).at_release
        self.cutover = ctx.faults.cutover  # faults.epoch_desync: a rank that miscounts

    def advance(self, flips: int) -> None:
        ctx = self.ctx
        ctx.epoch += 1 + self.cutover.extra_epochs(flips)

    def check(self, pass_id: int) -> None:
        ctx = self.ctx
        mine = torch.tensor([ctx.epoch], dtype=torch.int64)
        since = ctx.board.block(Op.RECV, -1, 0, -1, pass_id, -1)
        every = ctx.t.all_gather(mine)
        ctx.board.unblock(Op.RECV, -1, 0, -1, pass_id, -1, since)
        epochs = [int(e) for e in every]
        if len(set(epochs)) > 1:
            odd = next(r for r, e in enumerate(epochs) if e != epochs[0])
            ctx.stop(
                f"epoch desync at cutover (pass {pass_id}): rank0 epoch={epochs[0]}, "
                f"rank{odd} epoch={epochs[odd]}"
            )


class SeamCrossing:
    """What crosses the TP->PP seam with the residents (flip.seam_tail)."""

    def __init__(self, ctx: RankContext, proto: Protocol) -> None:
        self.ctx = ctx
        self.seam_tail = proto.of(SeamTail)
        self.tp_tail: list[int] = []  # rids the TP phase's last batch sampled a token for
        self.lost = 0

    def cross(self, pass_id: int, residents: list) -> None:
        """flip.seam_tail=rank0_local, the design before sgl-project#987: the token the TP
        phase's last batch sampled never crosses the tp_to_pp seam, so only rank 0 keeps it and
        a follower's fill is one token short (the log's 8447 vs 8446). `shared` (the fix
        published fill_len + fill tail with the entry) is what ppx's broadcast already does."""
        tail, self.tp_tail = set(self.tp_tail), []
        if not self.seam_tail.rank0_only:
            return
        lost = [r for r in residents if r.rid in tail and r.output]
        self.lost += len(lost)  # every rank counts the same rids: a group event
        if self.ctx.is_first:
            return
        for req in lost:  # requeued already: no KV of this rank covers the dropped token
            req.output.pop()
            self.ctx.events.emit(
                "seam_tail_lost",
                pass_id,
                -1,
                req.rid,
                self.ctx.epoch,
                f"rank{self.ctx.rank} fill {req.seq_len} (rank0 holds {req.seq_len + 1})",
            )
