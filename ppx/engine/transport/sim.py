"""The simulated wire: gloo's semantics, modelled exactly, for ranks in one process.

Under `sim.semantics=nccl` the payload tags (>= 1) follow NCCL's rules instead (sim_nccl.py)
while the headers (tag 0) and the collectives keep gloo's, as on a GPU; what follows is gloo.

- `isend` posts the tensor on the (src, dst, tag) queue and returns at once; its handle's
  `wait()` returns only after the peer's matching `recv` took the tensor -- an unmatched
  isend never completes, so a flush of a payload nobody pulls blocks, as on gloo.
- `recv` blocks until the head of its (src, dst, tag) queue exists: FIFO per pair and tag.
- a collective completes when every member has entered it (the k-th collective of each
  rank is the same operation, or the run fails as gloo would); the result is computed in
  rank order, so it is identical everywhere and from run to run.
- the clock is the scheduler's virtual time; `wait_for` (the readiness contract's wait) is
  one scheduling point on the condition, not a poll.
Every operation that can block is a scheduling point; an isend is not (it never blocks, and
what it does is seen by the peer only through the queue, at the peer's own next point).
Each operation names the shared object it uses (footprint keys, for the dfs reduction): the
queue (src, dst, tag), the k-th collective, and `("hdr", dst)` for the header queues into
`dst` that the readiness evidence (the peer's sent counter, bumped with every header) reads.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import cast

import torch

from ppx.engine.transport.base import Arrival, Transport
from ppx.engine.transport.sim_nccl import NcclPlane
from ppx.engine.transport.sim_nccl_rank import NcclEndpoint
from ppx.engine.transport.sim_nccl_rules import SEMANTICS, NcclRules


@dataclass
class _Send:
    tensor: torch.Tensor | list[int]  # a header travels as its list (send_header)
    taken: bool = False


@dataclass
class _Collective:
    op: str
    parts: dict[int, torch.Tensor] = field(default_factory=dict)
    left: int = 0  # members that took their result (the entry is dropped after the last)


class SimWire:
    """What every rank's SimTransport of one run shares."""

    def __init__(self, sched, world: int, sim=None, board=None) -> None:
        """`sim`: the `sim` config section (SimCfg); None or semantics=gloo: gloo throughout.
        `board`: the run's status board, where the NCCL plane's own waits write a record."""
        self.sched, self.world, self.board = sched, world, board
        self.queues: dict[tuple[int, int, int], deque[_Send]] = defaultdict(deque)
        self.collectives: dict[int, _Collective] = {}
        self.coll_seq = [0] * world
        nccl = sim is not None and SEMANTICS.get(sim.semantics).nccl
        self.nccl = NcclPlane(world, NcclRules.of(sim)) if nccl else None
        # faults.timing=choice: the run's daemon that lands timed effects when the scheduler
        # picks it (ppx/sim/timing.py); None: they land after their delay
        self.timing = None


class _Handle:
    def __init__(self, t: SimTransport, send: _Send, dst: int, tag: int) -> None:
        self.t, self.send, self.dst, self.tag = t, send, dst, tag
        self.key = ("q", t.rank, dst, tag)

    def wait(self) -> None:
        s = self.send
        if s.taken:  # taken already: nothing to wait for, no scheduling point
            self.t.sched.touch(self.key, False)
            return
        self.t.sched.wait_until(
            lambda: s.taken, f"wait isend to rank{self.dst} tag {self.tag}", reads=(self.key,)
        )


class SimTransport(Transport):
    def __init__(self, wire: SimWire, rank: int) -> None:
        self.wire, self.sched = wire, wire.sched
        self.rank, self.world = rank, wire.world
        self.nccl = NcclEndpoint(wire.nccl, wire.sched, rank, wire.board) if wire.nccl else None
        if self.nccl is not None:
            self.nccl.start()  # connect=lazy with a start-up order: the set-up walk
            # an NCCL send's wait() does not wait for the peer: the channels' flush does
            self.rendezvous_sends = False
            # one communicator per pair has no tags: payloads must be taken in send order
            self.payload_with_header = not self.nccl.plane.rules.layout.per_kind

    # -- point to point ------------------------------------------------------------------
    def isend(self, dst: int, tag: int, tensor: torch.Tensor):
        if tag and self.nccl is not None and self.nccl.plane.carries(self.rank, dst):
            return self.nccl.isend(dst, tag, tensor.contiguous())
        return self._post(dst, tag, tensor.contiguous())

    def send_header(self, dst: int, values: list[int]):
        """The header's list itself goes on the queue (a list nobody changes after: the
        channels build a fresh one per message), not a tensor built, copied and read back."""
        return self._post(dst, 0, values)

    def _post(self, dst: int, tag: int, item) -> _Handle:
        send = _Send(item)
        self.wire.queues[(self.rank, dst, tag)].append(send)
        h = _Handle(self, send, dst, tag)
        self.sched.touch(h.key, True)
        if tag == 0:  # a header: the peer's readiness evidence moved with it
            self.sched.touch(("hdr", dst), True)
        return h

    def recv(self, src: int, tag: int, out: torch.Tensor) -> torch.Tensor:
        if tag and self.nccl is not None and self.nccl.plane.carries(src, self.rank):
            return self.nccl.recv(src, tag, out)
        send = self._take(src, tag, out.numel())
        payload = cast(torch.Tensor, send.tensor)  # a payload tag: never a header's list
        # a reshape costs a few us even when it changes nothing; most payloads arrive as sent
        out.copy_(payload if payload.shape == out.shape else payload.reshape(out.shape))
        send.taken = True
        return out

    def recv_new(self, src: int, tag: int, dtype: torch.dtype, shape: list[int], device: str):
        """A payload that arrives as it was sent (dtype, shape, the host) is cloned when taken:
        one torch call where a fresh buffer and a copy into it took two, the same bytes read
        at the same moment."""
        if tag and self.nccl is not None and self.nccl.plane.carries(src, self.rank):
            return super().recv_new(src, tag, dtype, shape, device)
        head = self.wire.queues[(src, self.rank, tag)]
        sent = head[0].tensor if head else None
        if not (
            isinstance(sent, torch.Tensor)
            and sent.dtype == dtype
            and list(sent.shape) == shape
            and device == "cpu"
            and sent.is_cpu
        ):  # not there yet, or another form: the receive as any other
            return super().recv_new(src, tag, dtype, shape, device)
        send = self._take(src, tag, sent.numel())
        send.taken = True
        return cast(torch.Tensor, send.tensor).clone()

    def recv_header(self, src: int, n: int) -> list[int]:
        send = self._take(src, 0, n)
        send.taken = True
        return cast(list[int], send.tensor)  # tag 0: send_header queued the list

    def _take(self, src: int, tag: int, numel: int) -> _Send:
        """The head of the (src, this rank, tag) queue, waited for; its size checked."""
        key = ("q", src, self.rank, tag)
        q = self.wire.queues[(src, self.rank, tag)]
        if q:
            self.sched.touch(key, True)
        else:
            self.sched.wait_until(lambda: bool(q), f"recv from rank{src} tag {tag}", reads=(key,))
        self.sched.touch(key, True)
        send = q.popleft()
        sent = len(send.tensor) if isinstance(send.tensor, list) else send.tensor.numel()
        if sent != numel:
            raise RuntimeError(
                f"sim: rank{self.rank} recv from rank{src} tag {tag}: {numel} elements "
                f"expected, {sent} sent"
            )
        return send

    def irecv(self, src: int, tag: int, out: torch.Tensor):
        """NCCL payload tags only (a group() needs a receive that does not block)."""
        if not tag or self.nccl is None:
            raise RuntimeError("sim: irecv exists for NCCL payload tags (sim.semantics=nccl)")
        return self.nccl.irecv(src, tag, out)

    def group(self):
        """ncclGroupStart/End around NCCL payload operations; nothing under gloo."""
        return self.nccl.group() if self.nccl is not None else contextlib.nullcontext()

    def host_sync(self) -> None:
        """A compute step's host sync with the device (sim.host_sync; nothing under gloo)."""
        if self.nccl is not None:
            self.nccl.host_sync()

    # -- collectives ---------------------------------------------------------------------
    def _enter(self, op: str, tensor: torch.Tensor) -> _Collective:
        w = self.wire
        seq = w.coll_seq[self.rank]
        w.coll_seq[self.rank] += 1
        c = w.collectives.setdefault(seq, _Collective(op))
        if c.op != op:
            raise RuntimeError(
                f"sim: collective #{seq} is {c.op} on one rank and {op} on rank{self.rank}"
            )
        c.parts[self.rank] = tensor.detach().clone()
        key = ("coll", seq)
        self.sched.touch(key, True)
        self.sched.wait_until(
            lambda: len(c.parts) == w.world, f"{op} (collective #{seq})", reads=(key,)
        )
        self.sched.touch(key, True)
        c.left += 1
        if c.left == w.world:
            del w.collectives[seq]
        return c

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        c = self._enter("all_reduce", tensor)
        total = c.parts[0].clone()
        for r in range(1, self.world):
            total += c.parts[r]
        tensor.copy_(total)
        return tensor

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        c = self._enter(f"broadcast from rank{src}", tensor)
        tensor.copy_(c.parts[src])
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        c = self._enter("all_gather", tensor)
        return [c.parts[r].clone() for r in range(self.world)]

    def barrier(self) -> None:
        self._enter("barrier", torch.zeros(1))

    # -- the clock -----------------------------------------------------------------------
    def now(self) -> float:
        return self.sched.clock()

    def sleep(self, seconds: float) -> None:
        self.sched.sleep(seconds, f"sleep {seconds:g}s")

    def arrival(self, delay_s: float, label: str) -> Arrival:
        """faults.timing=choice: the scheduler lands it when its strategy picks (a choice
        point, searched like any interleaving), not `delay_s` later."""
        if self.wire.timing is None:
            return super().arrival(delay_s, label)
        return self.wire.timing.arrival(f"rank{self.rank} {label}")

    def moment(self, label: str) -> Arrival:
        """faults.timing=choice: a pass count's effect lands when the strategy picks too,
        and each look at it while pending is a choice (timing.py: ChosenMoment)."""
        if self.wire.timing is None:
            return super().moment(label)
        return self.wire.timing.moment(f"rank{self.rank} {label}")

    def hold(self, delay_s: float, label: str) -> None:
        if self.wire.timing is None:
            return self.sleep(delay_s)
        a = self.wire.timing.arrival(f"rank{self.rank} {label}")  # the sender waits for it
        # parked, it does not look (timing.py: LOOK_BOUND): the daemon alone lands it
        self.sched.wait_until(a.peek, f"held: {label}", reads=(a.key,))

    def wait_for(
        self, pred, label: str, deadline: float | None = None, poll_s: float = 0.0
    ) -> bool:
        """One scheduling point: resume when `pred` holds or the clock passes `deadline`.
        The conditions the engine waits on read the peers' counters, which move with the
        headers sent to this rank (footprint `("hdr", rank)`)."""
        keys = (("hdr", self.rank),)
        for k in keys:
            self.sched.touch(k, False)
        if pred():
            return True
        sched = self.sched
        if deadline is None:
            sched.wait_until(pred, label, reads=keys)
        else:
            sched.clock()
            sched.wait_until(
                lambda: pred() or sched.now >= deadline, label, deadline, (*keys, sched.clock_key)
            )
        return pred()
