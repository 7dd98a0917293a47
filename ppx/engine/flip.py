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

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ppx.engine.board import F, Op
from ppx.engine.carry import carry
from ppx.engine.carry_check import CarryCheck
from ppx.engine.churn import Churn
from ppx.protocol.continuations import Cutover
from ppx.protocol.flip import EpochAdvance, Inflight, SeamTail
from ppx.protocol.flip_due import FlipDue

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.engine.context import RankContext
    from ppx.protocol.registry import Protocol

PHASES = ("pp", "tp")


class FlipControl:
    def __init__(
        self,
        ctx: RankContext,
        switch_plan: Callable[[str], None],
        proto: Protocol,
        readmit: Callable[[Req], None] | None = None,
        released: Callable[[], None] | None = None,
    ) -> None:
        self.ctx, self.switch_plan = ctx, switch_plan
        self.readmit = readmit  # a told row may apply at the re-admission
        self.released = released  # the policy forgets what belonged to the old layout
        self.clock = ctx.t.now  # wall time, or the simulator's virtual time
        f = ctx.cfg.flip
        self.enabled = bool(f.enabled)
        self.every_s, self.every_passes = float(f.every_s), int(f.every_passes)
        self.inflight = proto.of(Inflight)
        self.max_flips = int(f.max_flips)
        self.advance_at_release = proto.of(EpochAdvance).at_release
        self.desync_rank = int(ctx.cfg.faults.epoch_desync_rank)
        self.last_cutover_t = self.clock()
        self.last_cutover_pass = 0
        self.announced_pass: int | None = None  # a cutover is under way since this pass
        self.announced_t = 0.0
        self.flips = 0
        self.cutover_ms: list[float] = []
        self.retracted = 0
        self.reprefill_tokens = 0
        self.flip_voided = 0  # batches in flight that a void-mode flip voided, over the run
        self.to_void = 0  # batches in flight at this flip's announcement that it must void
        self.seam_tail = proto.of(SeamTail)
        self.tp_tail: list[int] = []  # rids the TP phase's last batch sampled a token for
        self.seam_tails_lost = 0
        self.continuation = proto.of(Cutover)  # flip.continuation: re-queue or carry
        self.carry_check: CarryCheck | None = None  # oracle.carry_check, built at the first carry
        self.when = proto.of(FlipDue)  # flip.due: may a due flip start at this pass?
        self.waited = 0  # passes the flip now due has waited on a prefill (rank 0)
        self.deferred = 0
        self.churn = Churn(ctx, self.when.name)  # the livelock bound across cutovers (rank 0)

    @property
    def draining(self) -> bool:
        return self.announced_pass is not None

    def due(self, pass_id: int) -> bool:
        """Rank 0: is a flip due at this pass? (Only rank 0 reads the clock; the others learn
        it from the chain, so no two ranks can decide differently.) Rank 0 also counts the
        churn here, once a pass in either phase, and stops the run at its bound."""
        if not self.enabled:
            return False
        self.churn.check(pass_id)
        if self.draining or (self.max_flips and self.flips >= self.max_flips):
            return False
        ran_out = bool(self.every_passes) and pass_id - self.last_cutover_pass >= self.every_passes
        ran_out |= bool(self.every_s) and self.clock() - self.last_cutover_t >= self.every_s
        if not ran_out:
            return False
        chunked = self.ctx.sched.chunked  # rank 0's prompt mid-prefill, if any
        if self.when.waits(chunked is not None, self.waited):
            if not self.waited:  # named once per wait
                self.ctx.events.emit(
                    "flip_wait",
                    pass_id,
                    -1,
                    chunked.rid,
                    self.ctx.epoch,
                    f"rid={chunked.rid} mid-prefill {chunked.computed}/{chunked.seq_len} "
                    f"(flip.due={self.when.name})",
                )
            self.waited += 1
            self.deferred += 1
            return False
        return True

    def announce(self, pass_id: int) -> None:
        """Every rank, at the pass whose chain carries the flip: stop admitting; in `void`
        mode the slots in flight will come back as voids."""
        ctx = self.ctx
        self.announced_pass, self.announced_t = pass_id, self.clock()
        ctx.sched.pause()
        if self.inflight.voids_inflight:
            self.to_void = ctx.sched.num_inflight
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
        return self.announced_pass + self.ctx.num_slots - 1

    def voided(self) -> None:
        """A batch in flight at a void-mode announcement came back and was voided."""
        self.flip_voided += 1
        self.to_void -= 1

    def cutover(self, pass_id: int) -> None:
        ctx = self.ctx
        s = ctx.sched
        assert s.num_inflight == 0, f"rank{ctx.rank}: cutover with {s.num_inflight} slots in flight"
        if self.to_void > 0:
            # flip.inflight=void: each batch in flight at the announcement comes back before
            # the cutover (the assert above); one that was not voided finished as under
            # `drain`, so the run would be served with the design it names never run
            ctx.stop(
                f"flip void: {self.to_void} of the batches in flight at the announcement "
                f"(pass {self.announced_pass}) were not voided by the cutover (pass {pass_id})"
            )
        # every request mid-prefill: the continuations the pointer and the cells name, and any
        # a void parked outside them (engine.admission.void=keep)
        mid = s.continuations() + s.strays()
        carried = mid if self.continuation.survives else []
        residents = [r for slot in s.running for r in slot]
        residents += [r for r in mid if r not in carried]
        pointer, old_cache = s.chunked, s.cache
        self.churn.cutover(pass_id, residents)  # before the re-queue: how far each had got
        self.waited = 0
        for req in residents:
            self.reprefill_tokens += req.computed
            s.requeue(req)  # generated tokens are kept; the KV is about to be released
        self.retracted += len(residents)
        if self.target == "pp":
            self.cross_seam(pass_id, residents)
        if s.cache.host is not None:  # the released tree goes to the host tier of this layout
            s.cache.tree.evict(s.cache.tree.size, s.cache.host.save)
        if self.released is not None:
            self.released()
        target = self.target
        if self.advance_at_release:
            self.advance_epoch()
        self.switch_plan(target)
        if carried:
            self.carry(pass_id, old_cache, carried, pointer, target)
        if self.readmit is not None:
            # the re-admission into the new layout's queue, where the log applied the told
            # row (`_add_request_to_queue`)
            for req in residents:
                self.readmit(req)
        if not self.advance_at_release:
            self.advance_epoch()
        self.check_epochs(pass_id)
        ms = (self.clock() - self.announced_t) * 1e3
        self.cutover_ms.append(ms)
        self.flips += 1
        self.announced_pass = None
        self.last_cutover_t, self.last_cutover_pass = self.clock(), pass_id
        ctx.board.set(F.FLIPS, self.flips)
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

    def carry(self, pass_id: int, old_cache, carried: list, pointer, target: str) -> None:
        """flip.continuation=survive: the continuations stay resident un-retracted, their KV
        re-laid out for the new plan. The cells take them in order, the pointer's first; a
        one-slot plan (TP) has one cell, and the others stay resident with no cell (the
        state sgl-project#959's assert found)."""
        s, ctx = self.ctx.sched, self.ctx
        carry(ctx, old_cache, carried, target, pass_id)
        if ctx.cfg.oracle.carry_check:
            if self.carry_check is None:
                self.carry_check = CarryCheck(ctx.cfg, ctx.rank, ctx.world)
            for req in carried:
                wrong = self.carry_check.first_difference(s.cache, req, target)
                if wrong is not None:
                    ctx.stop(wrong)
        first = pointer if pointer in carried else carried[0]
        order = [first] + [r for r in carried if r is not first]
        s.seat_carried(order)
        self.continuation.carried += len(carried)
        self.ctx.events.emit(
            "flip_carry",
            pass_id,
            -1,
            first.rid,
            self.ctx.epoch,
            f"{[(r.rid, r.computed) for r in order]} carried into {target}; cells "
            f"{[r.rid if r else -1 for r in s.cells] if s.per_slot else [first.rid]}",
        )

    def advance_epoch(self) -> None:
        ctx = self.ctx
        ctx.epoch += 1
        if ctx.rank == self.desync_rank and self.flips == 0:
            ctx.epoch += 1  # faults.epoch_desync_rank: this rank miscounts its first cutover

    def note_tp_batch(self, rids: list[int]) -> None:
        """The TP phase sampled a token for each of `rids` (every rank applied the same ones)."""
        self.tp_tail = rids

    def cross_seam(self, pass_id: int, residents: list) -> None:
        """flip.seam_tail=rank0_local, the design before sgl-project#987: the token the TP
        phase's last batch sampled never crosses the tp_to_pp seam, so only rank 0 keeps it and
        a follower's fill is one token short (the log's 8447 vs 8446). `shared` (the fix
        published fill_len + fill tail with the entry) is what ppx's broadcast already does."""
        tail, self.tp_tail = set(self.tp_tail), []
        if not self.seam_tail.rank0_only:
            return
        lost = [r for r in residents if r.rid in tail and r.output]
        self.seam_tails_lost += len(lost)  # every rank counts the same rids: a group event
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

    def check_epochs(self, pass_id: int) -> None:
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

    def counters(self) -> dict:
        ms = sorted(self.cutover_ms)
        return {
            "flips": self.flips,
            "retracted_at_flip": self.retracted,
            "reprefill_tokens": self.reprefill_tokens,
            "flip_voided": self.flip_voided,
            "seam_tails_lost": self.seam_tails_lost,
            "flips_deferred": self.deferred,
            "readmits": self.churn.readmits,
            "cutover_ms": [round(x, 3) for x in ms],
        }
