"""gloo transport over torch.distributed (CPU processes, one rank each).

gloo p2p is a rendezvous: an isend completes only when the peer posts the matching recv. Two
traps shape this file: polling `irecv().is_completed()` never turns true without `wait()`,
and `wait(timeout=...)` closes the pair for every peer. So receives block, handles are only
ever waited without a timeout, and every deadline lives in Python (the supervisor's watchdog).
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from ppx.engine.transport.base import Handle, Transport


def issued(work: dist.Work | None) -> dist.Work:
    """The handle of a p2p operation: torch returns None only to a rank outside the
    operation's group, and every group this transport sends on holds this rank."""
    assert work is not None, "a p2p operation on a group this rank is not in"
    return work


class GlooTransport(Transport):
    def __init__(
        self, rank: int, world: int, port: int, host: str = "127.0.0.1", store=None
    ) -> None:
        self.rank, self.world = rank, world
        where = {"store": store} if store is not None else {"init_method": f"tcp://{host}:{port}"}
        dist.init_process_group(
            "gloo",
            **where,
            rank=rank,
            world_size=world,
            # the group-level timeout only bounds rendezvous/collectives; p2p waits carry none
            timeout=datetime.timedelta(seconds=600),
        )

    def isend(self, dst: int, tag: int, tensor: torch.Tensor) -> Handle:
        return issued(dist.isend(tensor.contiguous(), dst, tag=tag))

    def recv(self, src: int, tag: int, out: torch.Tensor) -> torch.Tensor:
        dist.recv(out, src, tag=tag)
        return out

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(tensor)
        return tensor

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        dist.broadcast(tensor, src)
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        every = [torch.empty_like(tensor) for _ in range(self.world)]
        dist.all_gather(every, tensor.contiguous())
        return every

    def barrier(self) -> None:
        dist.barrier()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
