"""One GPU per rank: payload tensors over NCCL, headers and collectives over gloo.

Headers (tag 0) stay on the gloo default group, so the channel semantics (FIFO control
plane, inbox stash, try_recv off the wire) are unchanged. NCCL has no tags, and a payload is
pulled only by the consumer of its kind, in an order that can differ from the send order
across kinds; so each kind gets its own NCCL communicator, where order per pair is FIFO.
Not yet run on hardware (no multi-GPU machine was available): see benchmarks/gpu_check.sh.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ppx.engine.transport.gloo import GlooTransport


class NcclTransport(GlooTransport):
    def __init__(
        self, rank: int, world: int, port: int, num_kinds: int, host: str = "127.0.0.1"
    ) -> None:
        super().__init__(rank, world, port, host)
        torch.cuda.set_device(rank)
        self.payload_device = f"cuda:{rank}"
        # every rank creates the groups in the same order (a collective call)
        self.groups = {tag: dist.new_group(backend="nccl") for tag in range(1, num_kinds + 1)}

    def isend(self, dst: int, tag: int, tensor: torch.Tensor):
        if tag == 0:
            return super().isend(dst, tag, tensor)
        return dist.isend(tensor.contiguous(), dst, group=self.groups[tag])

    def recv(self, src: int, tag: int, out: torch.Tensor) -> torch.Tensor:
        if tag == 0:
            return super().recv(src, tag, out)
        dist.recv(out, src, group=self.groups[tag])
        return out
