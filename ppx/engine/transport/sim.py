"""The simulated wire: gloo's semantics, modelled exactly, for ranks in one process.

- `isend` posts the tensor on the (src, dst, tag) queue and returns at once; its handle's
  `wait()` returns only after the peer's matching `recv` took the tensor -- an unmatched
  isend never completes, so a flush of a payload nobody pulls blocks, as on gloo.
- `recv` blocks until the head of its (src, dst, tag) queue exists: FIFO per pair and tag.
- a collective completes when every member has entered it (the k-th collective of each
  rank is the same operation, or the run fails as gloo would); the result is computed in
  rank order, so it is identical everywhere and from run to run.
- the clock is the scheduler's virtual time.
Every operation is a scheduling point.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

import torch

from ppx.engine.transport.base import Transport


@dataclass
class _Send:
    tensor: torch.Tensor
    taken: bool = False


@dataclass
class _Collective:
    op: str
    parts: dict[int, torch.Tensor] = field(default_factory=dict)
    left: int = 0  # members that took their result (the entry is dropped after the last)


class SimWire:
    """What every rank's SimTransport of one run shares."""

    def __init__(self, sched, world: int) -> None:
        self.sched, self.world = sched, world
        self.queues: dict[tuple[int, int, int], deque[_Send]] = defaultdict(deque)
        self.collectives: dict[int, _Collective] = {}
        self.coll_seq = [0] * world


class _Handle:
    def __init__(self, t: SimTransport, send: _Send, dst: int, tag: int) -> None:
        self.t, self.send, self.dst, self.tag = t, send, dst, tag

    def wait(self) -> None:
        s = self.send
        self.t.sched.wait_until(lambda: s.taken, f"wait isend to rank{self.dst} tag {self.tag}")


class SimTransport(Transport):
    def __init__(self, wire: SimWire, rank: int) -> None:
        self.wire, self.sched = wire, wire.sched
        self.rank, self.world = rank, wire.world

    # -- point to point ------------------------------------------------------------------
    def isend(self, dst: int, tag: int, tensor: torch.Tensor) -> _Handle:
        send = _Send(tensor.contiguous())
        self.wire.queues[(self.rank, dst, tag)].append(send)
        self.sched.point(f"isend to rank{dst} tag {tag}")
        return _Handle(self, send, dst, tag)

    def recv(self, src: int, tag: int, out: torch.Tensor) -> torch.Tensor:
        q = self.wire.queues[(src, self.rank, tag)]
        self.sched.wait_until(lambda: bool(q), f"recv from rank{src} tag {tag}")
        send = q.popleft()
        if send.tensor.numel() != out.numel():
            raise RuntimeError(
                f"sim: rank{self.rank} recv from rank{src} tag {tag}: {out.numel()} elements "
                f"expected, {send.tensor.numel()} sent"
            )
        out.copy_(send.tensor.reshape(out.shape))
        send.taken = True
        return out

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
        self.sched.wait_until(lambda: len(c.parts) == w.world, f"{op} (collective #{seq})")
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
        return self.sched.now

    def sleep(self, seconds: float) -> None:
        self.sched.sleep(seconds, f"sleep {seconds:g}s")
