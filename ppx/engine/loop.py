"""The pass steps of the PP phase, run in the order the ordering names (ppx/protocol/ordering).

Pass i works on slot i mod S. The rule the reference log arrived at, which the `decision_first`
preset obeys and the wedging presets break: a rank never blocks on a peer for something that
is not required for this pass's progress, and it satisfies everything a peer can block on
(posts its sends) before it blocks on that peer.

The steps hold the rank's context, its ordering, the admission and return-path seams
(engine/admission/base.py), the flip control, the output ring's strategy, the width check and
the result applier; they read no switch themselves. A design adds a step of its own through
`hook_designs` (Variant.pass_steps), never by editing this file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import torch

from ppx.core import Flag, Kind, Message, SlotBatch, StopRun
from ppx.engine.board import ALL_PEERS, F, Op
from ppx.engine.codec import chain_message, decode_requests
from ppx.engine.faults.base import Carry
from ppx.engine.int_tensor import int_tensor
from ppx.engine.proxy_turns import NeverPulled, NeverSent
from ppx.protocol.ordering import Step

if TYPE_CHECKING:
    from ppx.engine.admission.seams import Seams
    from ppx.engine.context import RankContext
    from ppx.engine.flip import FlipControl
    from ppx.engine.intake import Intake
    from ppx.engine.results import Results
    from ppx.engine.ring import Ring
    from ppx.protocol.axis import Variant
    from ppx.protocol.width_check import WidthCheck


@dataclass
class PassState:
    pass_id: int
    slot: int
    batch: SlotBatch | None = None
    scheduled: bool = False
    decision: Message | None = None
    shutdown: bool = False


class PassSteps:
    def __init__(
        self,
        ctx: RankContext,
        ordering: list[Step],
        seams: Seams,
        flip: FlipControl,
        ring: Ring,
        width: WidthCheck,
        intake: Intake | None,
        results: Results,
        carry: Carry | None = None,
    ) -> None:
        self.ctx, self.flip, self.ring, self.width = ctx, flip, ring, width
        self.ordering = ordering  # engine.ordering: this rank's steps, in order
        self.admission, self.returns = seams.admission, seams.returns
        self.intake, self.results = intake, results
        self.carry = carry or Carry()  # faults.retract, else inert
        self.sampled: dict[int, torch.Tensor] = {}  # last rank: pass_id -> its sampled tokens
        self.to_relay: Message | None = None  # the output that arrived last pass, relayed next
        # an ordering names its steps (ppx/protocol/ordering.STEPS); each maps to one bound
        # method here, so every caller of a step is found by a search for its name
        self.table: dict[str, Callable[[PassState, Step], None]] = {
            "chain": self.step_chain,
            "schedule": self.step_schedule,
            "decision": self.step_decision,
            "launch": self.step_launch,
            "output": self.step_output,
            "lap": self.step_lap,
            "flush": self.step_flush,
            "collective": self.step_collective,
            "group": self.step_group,
        }
        self.collectives = 0  # this rank's count of pass collectives: the record's seq

    def hook_designs(self, designs: Iterable[Variant]) -> None:
        """The pass steps the chosen designs add (Variant.pass_steps): an ordering names them
        like the built-in ones, and the pass runs the design's `run_step` there."""
        for design in designs:
            for name in type(design).pass_steps:
                self.table[name] = partial(self._design_step, design, name)

    def _design_step(self, design: Variant, name: str, p: PassState, step: Step) -> None:
        design.run_step(name, self.ctx, p)

    def run(self, p: PassState) -> None:
        table = self.table
        try:
            for step in self.ordering:
                table[step.name](p, step)
        except NeverPulled as e:  # raised in whichever receive read the proxy's header
            self.ctx.stop(str(e), p)

    # -- chain ----------------------------------------------------------------------------
    def step_chain(self, p: PassState, step: Step) -> None:
        ctx = self.ctx
        if ctx.is_first:
            idle = ctx.sched.idle and not self.to_relay and not self.flip.draining
            assert self.intake is not None, "rank 0 holds the intake"
            reqs, flags = self.intake.take(idle=idle)
            # only rank 0 reads the flip clock; the others learn the flip from this chain
            flags |= Flag.FLIP if self.flip.due(p.pass_id, bool(reqs)) else 0
            reqs, flags, aux = self.carry.chain_out(reqs, flags)
            msg = chain_message(reqs, flags, p.slot, p.pass_id, ctx.epoch, aux)
        else:
            msg = ctx.ch.recv(ctx.prev, Kind.CHAIN, p.slot, p.pass_id)
            reqs, flags = decode_requests(msg), msg.flags
            self.carry.chain_in(ctx.sched, msg)
            if msg.epoch != ctx.epoch:
                ctx.stop(
                    f"epoch desync on the chain (pass {p.pass_id}): rank{ctx.prev} epoch="
                    f"{msg.epoch}, rank{ctx.rank} epoch={ctx.epoch}",
                    p,
                )
        if not ctx.is_last:
            fwd = Message(
                Kind.CHAIN,
                p.slot,
                p.pass_id,
                ctx.epoch,
                flags=flags,
                aux=msg.aux,
                tensors=msg.tensors,
            )
            ctx.ch.send(ctx.next, fwd)
            if step.flush:
                ctx.ch.flush([Kind.CHAIN], p.pass_id)
        ctx.sched.add(reqs)
        p.shutdown = bool(flags & Flag.SHUTDOWN)
        if flags & Flag.FLIP:  # control riding the chain: a flip at this pass, on every rank
            self.flip.announce(p.pass_id)

    # -- schedule / decision --------------------------------------------------------------
    def step_schedule(self, p: PassState, step: Step) -> None:
        self.admission.schedule(p)
        p.scheduled = True
        self.log_admits(p)

    def log_admits(self, p: PassState) -> None:
        ctx = self.ctx
        ctx.sched.moves.report_admits(ctx.events.emit, p.pass_id, p.slot, ctx.epoch)

    def step_decision(self, p: PassState, step: Step) -> None:
        if step.part in ("", "recv"):
            self.admission.recv_decision(p)
            self.log_admits(p)
        if step.part in ("", "send"):
            self.admission.send_decision(p)
        if step.flush:
            self.ctx.ch.flush([Kind.DECISION], p.pass_id)

    # -- launch ---------------------------------------------------------------------------
    def step_launch(self, p: PassState, step: Step) -> None:
        ctx, b = self.ctx, p.batch
        if not ctx.is_first:  # this pass's proxy is pulled now or never (proxy_turns.py)
            ctx.ch.proxy_turn(ctx.prev, p.pass_id, pulls=b is not None)
        if b is None:
            return
        fi = ctx.sched.inputs(b, ctx.is_first) if not b.voided else None
        if not ctx.is_first:
            try:
                msg = ctx.ch.recv(ctx.prev, Kind.PROXY, p.slot, p.pass_id, width=b.num_tokens)
            except NeverSent as e:  # the upstream formed no batch for the slot
                ctx.stop(e.width_check(ctx.rank, p.slot, b.num_tokens, b.rids), p)
            if msg.flags & Flag.VOID or b.voided:
                self.pass_void_down(p, b, msg, step)
                return
            if not self.check_proxy(p, msg):
                return
            assert fi is not None, "a voided batch went down the void path above"
            fi.hidden = msg.tensors[0]
        assert fi is not None, "rank 0 never launches a voided batch: it voids at the output"
        since = ctx.board.block(Op.COMPUTE, -1, 0, p.slot, p.pass_id, -1)
        out = ctx.model.forward(fi, ctx.cache.k, ctx.cache.v, ctx.cache.req_to_token)
        ctx.t.host_sync()  # sim.host_sync: a compute that waits for the device's NCCL work
        ctx.board.unblock(Op.COMPUTE, -1, 0, p.slot, p.pass_id, -1, since)
        b.launched = True
        ctx.sched.after_launch(b)
        ctx.board.add(F.WORK_PASSES)
        if ctx.is_last:
            self.sampled[p.pass_id] = out.to("cpu")
        else:
            fp = int_tensor(b.fingerprint())
            ctx.ch.send(
                ctx.next, Message(Kind.PROXY, p.slot, p.pass_id, ctx.epoch, tensors=[out, fp])
            )
            if step.flush:  # a blocking crossing: completes before anything else this pass
                ctx.ch.flush([Kind.PROXY], p.pass_id)

    def pass_void_down(self, p: PassState, b: SlotBatch, msg: Message, step: Step) -> None:
        """A void travels down the pipeline on the proxy channel; an upstream payload was
        pulled (so the upstream flush completes) and is discarded."""
        ctx = self.ctx
        if msg.flags & Flag.VOID and msg.tensors:
            b.obs = msg.tensors[0].tolist() + b.obs
        b.voided = True
        if not ctx.is_last:
            obs = torch.tensor(b.obs, dtype=torch.int64).reshape(-1, 4)
            void = Message(Kind.PROXY, p.slot, p.pass_id, ctx.epoch, flags=Flag.VOID, tensors=[obs])
            ctx.ch.send(ctx.next, void)
            if step.flush:
                ctx.ch.flush([Kind.PROXY], p.pass_id)
        if self.ring.relay.voids_here:
            self.void_here(p, b)  # #797 / #1071: this rank empties the slot itself

    def check_proxy(self, p: PassState, msg: Message) -> bool:
        """The width check, on every proxy receive (engine.width_check)."""
        ctx, b = self.ctx, p.batch
        assert b is not None, "a proxy is checked against a batch this rank formed"
        rows = int(msg.tensors[0].shape[0])
        theirs = msg.tensors[1].tolist()
        refused = self.width.refusal(ctx.rank, b)
        if refused is not None:
            ctx.stop(refused, p)
            return False
        if self.width.agrees(rows, theirs, b):
            return True
        ctx.stop(
            f"proxy width check: rank{ctx.rank} slot={p.slot} pass={p.pass_id} "
            f"rows={rows} vs tokens={b.num_tokens}; upstream batch {theirs[0::2]} "
            f"vs local {b.rids}",
            p,
        )
        return False

    # -- output ring ----------------------------------------------------------------------
    def step_output(self, p: PassState, step: Step) -> None:
        ctx, b = self.ctx, p.batch
        if ctx.is_last and b is not None:
            self.send_output(p, b)
        if not ctx.is_last and self.to_relay is not None:
            # each hop is one pass behind: relay what arrived last pass
            ctx.ch.send(ctx.next, self.to_relay)
            self.to_relay = None
        nxt = (p.pass_id + 1) % ctx.num_slots
        want = ctx.sched.inflight[nxt]
        if want is None:
            middle = not ctx.is_first and not ctx.is_last
            if self.ring.recv.owes_resident_output(ctx.sched, nxt, middle):
                self.recv_resident_output(p, nxt)
            return
        src = ctx.world - 1 if ctx.is_first else ctx.prev
        finals = len([e for e in want.entries if e.final])
        msg = ctx.ch.recv(src, Kind.OUTPUT, nxt, want.pass_id, width=finals)
        if not ctx.is_last and self.ring.relay.relays(msg, ctx.next):
            self.to_relay = Message(
                Kind.OUTPUT,
                msg.slot,
                msg.pass_id,
                msg.epoch,
                flags=msg.flags,
                aux=msg.aux,
                tensors=msg.tensors,
            )
        self.results.apply(nxt, want, msg, p)

    def send_output(self, p: PassState, b: SlotBatch) -> None:
        """The last rank: this pass's sampled tokens to rank 0 (the ring wraps), or a void
        output that keeps rank 0's output receive matched -- unless the ring design sends
        none (engine.ordering.void_relay=downstream, #1071)."""
        ctx = self.ctx
        tokens = self.sampled.pop(p.pass_id, torch.zeros(0, dtype=torch.int64))
        if not b.voided:
            ctx.ch.send(0, Message(Kind.OUTPUT, p.slot, p.pass_id, ctx.epoch, tensors=[tokens]))
        elif self.ring.relay.sends_void_output:
            obs = torch.tensor(b.obs, dtype=torch.int64).reshape(-1, 4)
            void = Message(
                Kind.OUTPUT, p.slot, p.pass_id, ctx.epoch, flags=Flag.VOID, tensors=[tokens, obs]
            )
            ctx.ch.send(0, void)

    def recv_resident_output(self, p: PassState, slot: int) -> None:
        """sgl-project#802's intermediate hop: its receive keyed on the slot's residents while
        the upstream relays only what it received. Nothing is owed here, so this blocks until
        the ring wedges (or readiness names this arc); whatever does arrive belongs to
        another batch."""
        ctx = self.ctx
        try:
            msg = ctx.ch.recv(ctx.prev, Kind.OUTPUT, slot, p.pass_id + 1 - ctx.num_slots)
        except StopRun as e:  # readiness: say which predicate asked for the receive
            raise StopRun(
                f"{e}; rank{ctx.rank} keyed this receive on its residents, rank{ctx.prev} "
                "relays only what it received (sgl-project#802)"
            ) from None
        ctx.stop(
            f"output mismatch: rank{ctx.rank} slot={slot} holds residents but no batch in "
            f"flight and consumed the output of slot={msg.slot} pass={msg.pass_id}",
            p,
        )

    def void_here(self, p: PassState, b: SlotBatch) -> None:
        """A rank-local void: this rank re-queues the pass's requests now (residents stay in
        the slot), instead of at the void output the ring would bring back."""
        ctx = self.ctx
        obs = torch.tensor(b.obs, dtype=torch.int64).reshape(-1, 4)
        none = torch.zeros(0, dtype=torch.int64)
        void = Message(
            Kind.OUTPUT, p.slot, p.pass_id, ctx.epoch, flags=Flag.VOID, tensors=[none, obs]
        )
        self.returns.absorb(p.slot, b, void, p)

    # -- lap / flush ----------------------------------------------------------------------
    def step_lap(self, p: PassState, step: Step) -> None:
        self.returns.lap(p, step.block)

    def step_flush(self, p: PassState, step: Step) -> None:
        kinds = [Kind[k.upper()] for k in step.kinds] or None
        self.ctx.ch.flush(kinds, p.pass_id)

    # -- steps of protocols ppx was not built from ---------------------------------------
    def step_collective(self, p: PassState, step: Step) -> None:
        """A world collective placed in the pass: every rank enters it, so a rank blocked on
        a peer's point-to-point send (which that peer issues after the collective) wedges the
        group. Its blocked-on record names every peer, so the wait-for graph sees the cycle."""
        ctx, t = self.ctx, self.ctx.t
        self.collectives += 1
        since = ctx.board.block(Op.COLLECTIVE, ALL_PEERS, 0, p.slot, p.pass_id, self.collectives)
        one = torch.ones(1, dtype=torch.int64)
        if step.op == "all_reduce":
            t.all_reduce(one)
        elif step.op == "all_gather":
            t.all_gather(one)
        elif step.op == "broadcast":
            t.broadcast(one, 0)
        else:
            t.barrier()
        ctx.board.unblock(Op.COLLECTIVE, ALL_PEERS, 0, p.slot, p.pass_id, self.collectives, since)

    def step_group(self, p: PassState, step: Step) -> None:
        """The inner steps issued as one transport group (NCCL's ncclGroupStart/End: the
        sends and receives inside start together, none completes before the group ends)."""
        table = self.table
        with self.ctx.t.group():
            for inner in step.steps:
                table[inner.name](p, inner)
