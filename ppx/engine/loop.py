"""The pass steps and the ordering that sequences them (PP phase).

Pass i works on slot i mod S. The ordering (config) names the order of the steps and which
receives block. The rule the reference log arrived at, which the `decision_first` preset
obeys and the wedging presets break: a rank never blocks on a peer for something that is not
required for this pass's progress, and it satisfies everything a peer can block on (posts
its sends) before it blocks on that peer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ppx.core import Flag, Kind, Message, SlotBatch, StopRun
from ppx.engine.board import F, Op
from ppx.engine.codec import chain_message, decode_requests
from ppx.engine.faults import corrupt_sampled
from ppx.engine.ring import owes_resident_output, relays

STEPS = ("chain", "schedule", "decision", "launch", "output", "lap", "flush")


@dataclass(frozen=True)
class Step:
    name: str
    part: str = ""  # "" (both halves), "send" or "recv" (decision only)
    block: bool = False  # lap: a blocking receive instead of a peek
    flush: bool = False  # complete this step's sends before going on
    kinds: tuple[str, ...] = ()  # flush: only these kinds (default: every pending send)


def parse_ordering(steps: list) -> list[Step]:
    """Steps are strings (`chain`, `decision.send`) or maps (`{step: lap, block: true}`)."""
    out = []
    for item in steps:
        spec = {"step": item} if isinstance(item, str) else dict(item)
        name, _, part = str(spec.pop("step")).partition(".")
        if name not in STEPS or part not in ("", "send", "recv"):
            raise ValueError(f"unknown ordering step {item!r}; steps are {', '.join(STEPS)}")
        unknown = set(spec) - {"block", "flush", "kinds"}
        if unknown:
            raise ValueError(f"ordering step {item!r}: unknown option(s) {sorted(unknown)}")
        kinds = tuple(str(k) for k in spec.get("kinds", ()))
        bad = [k for k in kinds if k.upper() not in Kind.__members__]
        if bad or (kinds and name != "flush"):
            raise ValueError(
                f"ordering step {item!r}: `kinds` names message kinds, on a flush step"
            )
        out.append(
            Step(name, part, bool(spec.get("block", False)), bool(spec.get("flush", False)), kinds)
        )
    names = [s.name for s in out]
    for required in ("chain", "schedule", "launch", "output", "flush"):
        if required not in names:
            raise ValueError(f"ordering lacks the {required!r} step")
    return out


@dataclass
class PassState:
    pass_id: int
    slot: int
    batch: SlotBatch | None = None
    scheduled: bool = False
    decision: Message | None = None
    shutdown: bool = False


class PassSteps:
    """Step implementations shared by every ordering; `self` is the rank's loop (rank.py)."""

    # -- chain ----------------------------------------------------------------------------
    def step_chain(self, p: PassState, step: Step) -> None:
        if self.is_first:
            reqs, flags = self.intake.take(
                idle=self.sched.idle and not self.to_relay and not self.flip.draining
            )
            # only rank 0 reads the flip clock; the others learn the flip from this chain
            flags |= Flag.FLIP if self.flip.due(p.pass_id) else 0
            msg = chain_message(reqs, flags, p.slot, p.pass_id, self.epoch)
        else:
            msg = self.ch.recv(self.prev, Kind.CHAIN, p.slot, p.pass_id)
            reqs, flags = decode_requests(msg), msg.flags
            if msg.epoch != self.epoch:
                self.stop(
                    f"epoch desync on the chain (pass {p.pass_id}): rank{self.prev} epoch={msg.epoch}, "
                    f"rank{self.rank} epoch={self.epoch}",
                    p,
                )
        if not self.is_last:
            self.ch.send(
                self.next,
                Message(
                    Kind.CHAIN,
                    p.slot,
                    p.pass_id,
                    self.epoch,
                    flags=flags,
                    aux=msg.aux,
                    tensors=msg.tensors,
                ),
            )
            if step.flush:
                self.ch.flush([Kind.CHAIN], p.pass_id)
        self.sched.add(reqs)
        p.shutdown = bool(flags & Flag.SHUTDOWN)
        self.on_chain(p, msg)

    # -- schedule / decision --------------------------------------------------------------
    def step_schedule(self, p: PassState, step: Step) -> None:
        self.policy.schedule(p)
        p.scheduled = True
        self.log_admits(p)

    def log_admits(self, p: PassState) -> None:
        for rid, prefix in self.sched.admitted:
            self.events.emit("admit", p.pass_id, p.slot, rid, self.epoch, f"prefix_len={prefix}")
        self.sched.admitted.clear()

    def step_decision(self, p: PassState, step: Step) -> None:
        if step.part in ("", "recv"):
            self.policy.recv_decision(p)
            self.log_admits(p)
        if step.part in ("", "send"):
            self.policy.send_decision(p)
        if step.flush:
            self.ch.flush([Kind.DECISION], p.pass_id)

    # -- launch ---------------------------------------------------------------------------
    def step_launch(self, p: PassState, step: Step) -> None:
        b = p.batch
        if b is None:
            return
        fi = self.sched.inputs(b, self.is_first) if not b.voided else None
        if not self.is_first:
            msg = self.ch.recv(self.prev, Kind.PROXY, p.slot, p.pass_id, width=b.num_tokens)
            if msg.flags & Flag.VOID or b.voided:
                # a void travels down the pipeline on the proxy channel; an upstream payload
                # was pulled (so the upstream flush completes) and is discarded
                if msg.flags & Flag.VOID and msg.tensors:
                    b.obs = msg.tensors[0].tolist() + b.obs
                b.voided = True
                if not self.is_last:
                    obs = torch.tensor(b.obs, dtype=torch.int64).reshape(-1, 4)
                    self.ch.send(
                        self.next,
                        Message(
                            Kind.PROXY,
                            p.slot,
                            p.pass_id,
                            self.epoch,
                            flags=Flag.VOID,
                            tensors=[obs],
                        ),
                    )
                    if step.flush:
                        self.ch.flush([Kind.PROXY], p.pass_id)
                if self.cfg.engine.ordering.void_relay != "ring":
                    self.void_here(p, b)  # #797 / #1071: this rank empties the slot itself
                return
            if not self.check_proxy(p, msg):
                return
            fi.hidden = msg.tensors[0]
        since = self.board.block(Op.COMPUTE, -1, 0, p.slot, p.pass_id, -1)
        out = self.model.forward(fi, self.cache.k, self.cache.v, self.cache.req_to_token)
        self.board.unblock(Op.COMPUTE, -1, 0, p.slot, p.pass_id, -1, since)
        b.launched = True
        self.sched.after_launch(b)
        self.board.add(F.WORK_PASSES)
        if self.is_last:
            self.sampled[p.pass_id] = out.to("cpu")
        else:
            fp = torch.tensor(b.fingerprint(), dtype=torch.int64)
            self.ch.send(
                self.next, Message(Kind.PROXY, p.slot, p.pass_id, self.epoch, tensors=[out, fp])
            )
            if step.flush:  # a blocking crossing: completes before anything else this pass
                self.ch.flush([Kind.PROXY], p.pass_id)

    def check_proxy(self, p: PassState, msg: Message) -> bool:
        """The width check, on every proxy receive: rows must equal this rank's batch tokens,
        and the batch fingerprint must match (a same-width divergence is caught too)."""
        b = p.batch
        rows = int(msg.tensors[0].shape[0])
        theirs = msg.tensors[1].tolist()
        same = theirs == b.fingerprint() or self.cfg.engine.width_check == "rows"
        if rows != b.num_tokens or not same:
            self.stop(
                f"proxy width check: rank{self.rank} slot={p.slot} pass={p.pass_id} "
                f"rows={rows} vs tokens={b.num_tokens}; upstream batch {theirs[0::2]} "
                f"vs local {b.rids}",
                p,
            )
            return False
        return True

    # -- output ring ----------------------------------------------------------------------
    def step_output(self, p: PassState, step: Step) -> None:
        b = p.batch
        if self.is_last and b is not None:
            tokens = self.sampled.pop(p.pass_id, torch.zeros(0, dtype=torch.int64))
            if b.voided and (
                self.cfg.faults.drop_void_output
                or self.cfg.engine.ordering.void_relay == "downstream"
            ):
                pass  # the pre-#797 bug / #1071: rank 0's output receive is never matched
            elif b.voided:  # a void output keeps rank 0's output receive matched
                obs = torch.tensor(b.obs, dtype=torch.int64).reshape(-1, 4)
                self.ch.send(
                    0,
                    Message(
                        Kind.OUTPUT,
                        p.slot,
                        p.pass_id,
                        self.epoch,
                        flags=Flag.VOID,
                        tensors=[tokens, obs],
                    ),
                )
            else:
                tokens = corrupt_sampled(  # faults.corrupt_token (off unless configured)
                    self.cfg.faults,
                    self.rank,
                    self.world,
                    b,
                    self.sched.reqs,
                    tokens,
                    self.cfg.model.vocab,
                )
                self.ch.send(
                    0, Message(Kind.OUTPUT, p.slot, p.pass_id, self.epoch, tensors=[tokens])
                )
        if not self.is_last and self.to_relay is not None:
            # each hop is one pass behind: relay what arrived last pass
            self.ch.send(self.next, self.to_relay)
            self.to_relay = None
        nxt = (p.pass_id + 1) % self.num_slots
        want = self.sched.inflight[nxt]
        o = self.cfg.engine.ordering
        if want is None:
            middle = not self.is_first and not self.is_last
            if owes_resident_output(self.sched, nxt, middle, o.output_recv):
                self.recv_resident_output(p, nxt)
            return
        src = self.world - 1 if self.is_first else self.prev
        msg = self.ch.recv(
            src, Kind.OUTPUT, nxt, want.pass_id, width=len([e for e in want.entries if e.final])
        )
        if not self.is_last and relays(o.void_relay, msg, self.next):
            self.to_relay = Message(
                Kind.OUTPUT,
                msg.slot,
                msg.pass_id,
                msg.epoch,
                flags=msg.flags,
                aux=msg.aux,
                tensors=msg.tensors,
            )
        self.apply_output(nxt, want, msg, p)

    def recv_resident_output(self, p: PassState, slot: int) -> None:
        """sgl-project#802's intermediate hop: its receive keyed on the slot's residents while
        the upstream relays only what it received. Nothing is owed here, so this blocks until
        the ring wedges (or readiness names this arc); whatever does arrive belongs to
        another batch."""
        try:
            msg = self.ch.recv(self.prev, Kind.OUTPUT, slot, p.pass_id + 1 - self.num_slots)
        except StopRun as e:  # readiness: say which predicate asked for the receive
            raise StopRun(
                f"{e}; rank{self.rank} keyed this receive on its residents, rank{self.prev} "
                "relays only what it received (sgl-project#802)"
            ) from None
        self.stop(
            f"output mismatch: rank{self.rank} slot={slot} holds residents but no batch in "
            f"flight and consumed the output of slot={msg.slot} pass={msg.pass_id}",
            p,
        )

    def void_here(self, p: PassState, b: SlotBatch) -> None:
        """A rank-local void: this rank re-queues the pass's requests now (residents stay in
        the slot), instead of at the void output the ring would bring back."""
        obs = torch.tensor(b.obs, dtype=torch.int64).reshape(-1, 4)
        none = torch.zeros(0, dtype=torch.int64)
        void = Message(
            Kind.OUTPUT, p.slot, p.pass_id, self.epoch, flags=Flag.VOID, tensors=[none, obs]
        )
        self.policy.absorb(p.slot, b, void, p)

    # -- lap / flush ----------------------------------------------------------------------
    def step_lap(self, p: PassState, step: Step) -> None:
        self.policy.lap(p, step.block)

    def step_flush(self, p: PassState, step: Step) -> None:
        kinds = [Kind[k.upper()] for k in step.kinds] or None
        self.ch.flush(kinds, p.pass_id)
