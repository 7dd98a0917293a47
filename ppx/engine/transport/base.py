"""The one seam between a rank and the wire: point-to-point, collectives and the clock.

Everything a rank does to a peer goes through a `Transport`: gloo (CPU processes), nccl (one
GPU per rank, payloads on the GPU) and sim (every rank of a run in one process, advanced one
operation at a time by a deterministic scheduler). The rank's clock lives here too, because a
simulated run has virtual time: the flip clock, channel delays, the readiness budget and the
host tier's load-back all read `now()` / call `sleep()`, never `time` directly.

Semantics every implementation keeps (the engine depends on them):
- `isend` returns a handle whose `wait()` returns only when the peer's matching `recv` has
  taken the tensor (gloo's rendezvous; nccl needs help to keep it, see nccl.py).
- Messages are FIFO per (src, dst, tag).
- A collective completes when every member has entered it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Protocol

import torch

from ppx.engine.int_tensor import int_tensor


class Abandoned(BaseException):
    """Raised inside a rank whose run ended while it was parked on the wire (the simulator
    unwinds its tasks this way; a gloo rank in that state is killed instead). Not an error:
    a BaseException so the engine's `except Exception` never mistakes it for one."""


class Handle(Protocol):
    # `object`: torch's Work.wait returns a bool, the simulator's nothing; no caller reads it
    def wait(self) -> object: ...


class Arrival(Protocol):
    """A timed effect under way (a host-tier load, a delayed send): has it landed yet?"""

    def landed(self) -> bool: ...


class ClockArrival:
    """An effect that lands `delay_s` after it started, on `clock`."""

    def __init__(self, clock: Callable[[], float], delay_s: float) -> None:
        self.clock, self.at = clock, clock() + max(delay_s, 0.0)

    def landed(self) -> bool:
        return self.clock() >= self.at


class Landed:
    """An effect that has landed already: a fault's moment under a fixed timing."""

    def landed(self) -> bool:
        return True


LANDED = Landed()


class Transport:
    rank: int
    world: int
    payload_device: str = "cpu"  # where payload tensors travel from (nccl: this rank's GPU)
    # True when a payload isend's wait() returns only once the peer took it (gloo, sim); NCCL's
    # only orders the stream, so the channels wait on the peer's consumed counter instead
    rendezvous_sends: bool = True
    # True when the payload plane has no tags, only issue order per peer (nccl: one communicator
    # per pair): the channels then pull a message's payload right after its header, so payloads
    # are received in the order they were sent whatever kind the consumer asks for first
    payload_with_header: bool = False

    def payload_device_for(self, peer: int, sending: bool) -> str:
        """Where a payload to (sending) or from `peer` travels from (nccl: the GPU for the
        pairs it carries over NCCL, the host for those it sends over gloo)."""
        return self.payload_device

    # -- point to point ------------------------------------------------------------------
    def isend(self, dst: int, tag: int, tensor: torch.Tensor) -> Handle:
        raise NotImplementedError

    def recv(self, src: int, tag: int, out: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def recv_new(self, src: int, tag: int, dtype: torch.dtype, shape: list[int], device: str):
        """`recv` into a fresh tensor of `dtype` and `shape` on `device`, returned."""
        out = torch.empty(shape, dtype=dtype, device=device)
        self.recv(src, tag, out)
        return out

    # -- headers: `n` int64s on tag 0, an isend and a recv like any other ------------------
    def send_header(self, dst: int, values: list[int]) -> Handle:
        return self.isend(dst, 0, int_tensor(values))

    def recv_header(self, src: int, n: int) -> list[int]:
        buf = torch.empty(n, dtype=torch.int64)
        self.recv(src, 0, buf)
        return buf.tolist()

    def host_sync(self) -> None:
        """Called inside a compute step: where a device transport's host would sync with the
        device. Only the simulator models what that waits for (sim.host_sync); elsewhere
        nothing happens here."""

    def group(self) -> contextlib.AbstractContextManager[object]:
        """The operations issued inside run as one group (NCCL's ncclGroupStart/End); a
        transport without group semantics (gloo) issues them as they come."""
        return contextlib.nullcontext()

    # -- collectives (every member calls them in the same order) --------------------------
    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        raise NotImplementedError

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        raise NotImplementedError

    def barrier(self) -> None:
        raise NotImplementedError

    # -- the clock -----------------------------------------------------------------------
    def now(self) -> float:
        """Seconds on this run's clock (wall time, or the simulator's virtual time)."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    # -- a fault's timing: fixed here, a choice of the simulator's scheduler there -------
    def arrival(self, delay_s: float, label: str) -> Arrival:
        """A timed effect starting now (a host-tier load): it lands `delay_s` later on this
        clock. The simulator may let its scheduler choose when instead (faults.timing)."""
        return ClockArrival(self.now, delay_s)

    def hold(self, delay_s: float, label: str) -> None:
        """Hold the caller until a timed effect lands (a slow link's send)."""
        self.sleep(delay_s)

    def moment(self, label: str) -> Arrival:
        """An effect a pass count made due (a cache drop, a flip): landed at once here, so it
        acts at the pass its config names. The simulator may let its scheduler choose when
        instead (faults.timing), without reading the clock either way."""
        return LANDED

    def wait_for(
        self, pred: Callable[[], bool], label: str, deadline: float | None = None,
        poll_s: float = 0.0005,
    ) -> bool:  # fmt: skip
        """Until `pred()` holds (True) or this clock passes `deadline` (False). The engine
        waits this way only on shared-memory counters, never on the wire; a wall-clock
        transport polls them every `poll_s`, the simulator waits once, on the condition."""
        while not pred():
            if deadline is not None and self.now() > deadline:
                return False
            self.sleep(poll_s)
        return True

    def close(self) -> None:
        pass
