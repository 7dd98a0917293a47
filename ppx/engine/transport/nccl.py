"""One GPU per rank: stage-to-stage payloads over NCCL, everything else over gloo.

The design follows what `python -m ppx.study nccl_semantics` found safe under NCCL's rules
(sim.semantics=nccl, docs/protocols.md "On NCCL: wedges gloo hides"):
- One NCCL communicator per neighbour pair, carrying r -> r + 1 only (`pairs.forward_pairs`):
  pp - 1 communicators. The wraparound's payload (last -> 0: a few int64 token ids) goes over
  gloo with its header. No pair sends both ways on NCCL, so two ranks can never both sit in a
  send to each other on one stream-ordered communicator -- the wedge the study found at pp=2
  with synchronous sends for a communicator carrying both directions (NVIDIA/nccl#479).
- Created eagerly, every rank walking the same global order (`pairs.forward_pairs`): a pair's
  communicator is made inside a blocking call both ranks must reach; lazily, inside the first
  payload isend, the receiver would never get there (it posts its receive only after the
  header, which follows the isend) and the first message would hang (pytorch#108378).
- No tags on a communicator (NCCL matches by issue order): the transport says
  `payload_with_header`, so the channels receive a payload right after its header and
  payloads leave each communicator in the order they were sent.
- `work.wait()` on an NCCL send only orders streams; the channels restore gloo's rendezvous
  by waiting on the peer's consumed counter (`rendezvous_sends = False`). A payload receive
  waits on the host until its data is there (`is_completed()` is reliable on NCCL, unlike
  gloo), so a wedge shows as a blocked-on record where the rank is stuck, as on gloo.
- ppx's watchdog owns every deadline (see `nccl_environment`).
Not yet run on hardware (no multi-GPU machine was available): see benchmarks/gpu_check.sh.
"""

from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist

from ppx.engine.transport.base import Handle
from ppx.engine.transport.gloo import GlooTransport, issued
from ppx.engine.transport.pairs import forward_pairs, on_nccl

FORWARD_ONLY = True  # pairs.on_nccl: forward payloads take NCCL (sim.communicators=forward)


def local_gpu(rank: int) -> int:
    """This rank's GPU: LOCAL_RANK under torchrun (ranks of several nodes), else the rank."""
    return int(os.environ.get("LOCAL_RANK", rank))


def watchdog_timeout_s(cfg) -> int:
    """Longer than any run ppx lets live: its watchdog ends a wedge (stall_s) or a run
    (max_run_s) and tears the ranks down after the post-mortem (shutdown_grace_s) first."""
    w = cfg.watch
    return int(w.max_run_s + w.stall_s + w.shutdown_grace_s) + 60


def nccl_environment(timeout_s: int) -> dict[str, str]:
    """What torch's NCCL watchdog must not do to a ppx rank, set before any NCCL group exists
    (ProcessGroupNCCL reads it at construction; a value the user exported wins):
    - TORCH_NCCL_ASYNC_ERROR_HANDLING=0: on a timed-out or failed operation the watchdog
      neither aborts the communicator nor tears the process down (the default, 3, kills the
      rank: the run would end `crashed`/`dead_peer` instead of `wedged` with ppx's cycle);
      the supervisor tears every rank down itself, after the post-mortem.
    - TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: the monitor thread kills a process whose watchdog
      looks stuck after this long (480 s by default in recent torch); raised to the groups'
      own timeout, so it too fires only after ppx would have ended the run."""
    return {
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": str(timeout_s),
    }


class NcclTransport(GlooTransport):
    rendezvous_sends = False  # see the module docstring: the channels wait for the peer
    payload_with_header = True

    def __init__(
        self,
        rank: int,
        world: int,
        port: int,
        host: str = "127.0.0.1",
        store=None,
        timeout_s: int = 3600,
    ) -> None:
        for k, v in nccl_environment(timeout_s).items():
            os.environ.setdefault(k, v)
        super().__init__(rank, world, port, host, store)
        gpu = local_gpu(rank)
        torch.cuda.set_device(gpu)
        self.payload_device = f"cuda:{gpu}"
        self.groups = self._open_pairs(datetime.timedelta(seconds=timeout_s))

    def _open_pairs(self, timeout: datetime.timedelta) -> dict[tuple[int, int], dist.ProcessGroup]:
        """One communicator per neighbour pair, created in the one global order (a member
        blocks in it until its peer arrives; `new_group` is called by every rank, members or
        not, as torch requires). `device_id` makes the creation eager; one exchange per pair,
        in the same order, covers a torch that still creates the p2p communicator lazily."""
        device = torch.device(self.payload_device)
        groups = {}
        for a, b in forward_pairs(self.world):
            g = dist.new_group([a, b], timeout=timeout, backend="nccl", device_id=device)
            if self.rank in (a, b):
                groups[(a, b)] = g
        one = self._token()
        for a, b in forward_pairs(self.world):
            if self.rank == a:
                dist.send(one, b, group=groups[(a, b)])
            elif self.rank == b:
                dist.recv(one, a, group=groups[(a, b)])
        torch.cuda.synchronize()
        return groups

    def _token(self) -> torch.Tensor:
        return torch.zeros(1, device=self.payload_device)

    def payload_device_for(self, peer: int, sending: bool) -> str:
        src, dst = (self.rank, peer) if sending else (peer, self.rank)
        return self.payload_device if on_nccl(FORWARD_ONLY, src, dst) else "cpu"

    def isend(self, dst: int, tag: int, tensor: torch.Tensor) -> Handle:
        if tag == 0 or not on_nccl(FORWARD_ONLY, self.rank, dst):
            return super().isend(dst, tag, tensor)
        return issued(dist.isend(tensor.contiguous(), dst, group=self.groups[(self.rank, dst)]))

    def recv(self, src: int, tag: int, out: torch.Tensor) -> torch.Tensor:
        if tag == 0 or not on_nccl(FORWARD_ONLY, src, self.rank):
            return super().recv(src, tag, out)
        work = issued(dist.irecv(out, src, group=self.groups[(src, self.rank)]))
        while not work.is_completed():  # NCCL only: never poll a gloo work (base.py)
            time.sleep(0.0002)
        work.wait()  # orders the current stream after the receive
        return out
