"""One GPU per rank: payload tensors over NCCL, headers and collectives over gloo.

Headers (tag 0) stay on the gloo default group, so the channel semantics (FIFO control
plane, inbox stash, try_recv off the wire) are unchanged. NCCL has no tags, and a payload is
pulled only by the consumer of its kind, in an order that can differ from the send order
across kinds; so each kind gets its own NCCL communicator, where order per pair is FIFO.

Two differences from gloo that the engine must not see:
- A pair's NCCL communicator is created inside its first p2p call on that pair, and that
  call blocks until the peer makes its own first call. A receiver posts its payload receive
  only after reading the gloo header, which the sender posts only after the payload send
  returned: the first payload message would deadlock. So every (kind, pair) communicator is
  created at start-up, every rank walking the same global order (`warmup_order`).
- `work.wait()` on an NCCL send only orders the stream; it does not wait for the peer. The
  gloo rendezvous (a flush waits until the peer took the payload) is restored by the
  channels, which wait on the peer's consumed counter when `rendezvous_sends` is False.
Not yet run on hardware (no multi-GPU machine was available): see benchmarks/gpu_check.sh.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from ppx.engine.transport.base import Handle
from ppx.engine.transport.gloo import GlooTransport


def warmup_order(world: int, tags: list[int]) -> list[tuple[int, int, int]]:
    """Every (tag, low rank, high rank) communicator, in the one order all ranks walk.

    A rank takes the entries it is part of, in this order. The smallest entry not yet done
    always has both its ranks free to reach it (everything before it is done), so the walk
    cannot deadlock -- unlike per-rank orders such as "my next neighbour first", where rank
    a waits for b on (a, b) while b waits for c on (b, c) and c for a on (c, a)."""
    return [(tag, a, b) for tag in tags for a in range(world) for b in range(a + 1, world)]


def local_gpu(rank: int) -> int:
    """This rank's GPU: LOCAL_RANK under torchrun (ranks of several nodes), else the rank."""
    return int(os.environ.get("LOCAL_RANK", rank))


class NcclTransport(GlooTransport):
    rendezvous_sends = False  # see the module docstring: the channels wait for the peer

    def __init__(
        self,
        rank: int,
        world: int,
        port: int,
        num_kinds: int,
        host: str = "127.0.0.1",
        store=None,
    ) -> None:
        super().__init__(rank, world, port, host, store)
        gpu = local_gpu(rank)
        torch.cuda.set_device(gpu)
        self.payload_device = f"cuda:{gpu}"
        # every rank creates the groups in the same order (a collective call)
        tags = list(range(1, num_kinds + 1))
        self.groups = {tag: dist.new_group(backend="nccl") for tag in tags}
        self._warm_up(tags)

    def _warm_up(self, tags: list[int]) -> None:
        one = torch.zeros(1, device=self.payload_device)
        for tag, a, b in warmup_order(self.world, tags):
            if self.rank == a:
                dist.send(one, b, group=self.groups[tag])
            elif self.rank == b:
                dist.recv(one, a, group=self.groups[tag])
        torch.cuda.synchronize()

    def isend(self, dst: int, tag: int, tensor: torch.Tensor) -> Handle:
        if tag == 0:
            return super().isend(dst, tag, tensor)
        return dist.isend(tensor.contiguous(), dst, group=self.groups[tag])

    def recv(self, src: int, tag: int, out: torch.Tensor) -> torch.Tensor:
        if tag == 0:
            return super().recv(src, tag, out)
        dist.recv(out, src, group=self.groups[tag])
        return out
