"""The shared objects of a simulated run besides the wire (ppx/engine/transport/sim.py): the
frontend <-> rank 0 queues, the status board, and the progress watch. Each turns what a gloo
run does with a thread or wall time into a scheduling point or a read of the virtual clock,
and says which footprint keys it touches (what the dfs reduction orders steps by).
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable

from ppx.engine.board import Board
from ppx.frontend.driver import Driver
from ppx.sim.scheduler import CLOCK, Scheduler


class SimQueue:
    """The frontend <-> rank 0 queues; a blocking `get` is a scheduling point."""

    def __init__(self, sched: Scheduler, name: str) -> None:
        self.sched, self.name, self.items = sched, name, deque()
        self.key = ("sq", name)
        self.history: list = []  # every item put, in order (ends.py: the order of commits)

    def put(self, item) -> None:
        self.sched.touch(self.key, True)
        self.items.append(item)
        self.history.append(item)

    def get_nowait(self):
        self.sched.touch(self.key, True)
        if not self.items:
            raise queue.Empty
        return self.items.popleft()

    def get(self, timeout: float):
        if not self.items:
            sched = self.sched
            wake = sched.clock() + timeout
            sched.wait_until(
                lambda: bool(self.items) or sched.now >= wake,
                f"wait {self.name}",
                wake,
                (self.key, CLOCK),
            )
        return self.get_nowait()

    def cancel_join_thread(self) -> None:
        pass

    def close(self) -> None:
        pass


class SimBoard(Board):
    """The status board of a simulated run. A rank reads its peers' sent counters (the
    readiness evidence) here: a read of `("hdr", reader)`, the key every header sent to the
    reader writes (a sent counter only moves with a header), so the dfs reduction orders a
    readiness check against the sends it could see."""

    def __init__(self, sched: Scheduler, world: int) -> None:
        super().__init__(None, world)
        self.sched = sched

    def sent(self, rank: int):
        tid = self.sched.running_tid
        if tid is not None and tid != rank:  # a peer's counters (a rank's own: its writes)
            self.sched.touch(("hdr", tid), False)
        return super().sent(rank)

    def clock_ns(self) -> int:
        return int(self.sched.now * 1e9)


class Progress:
    """The last (tokens, requests outstanding) the frontend saw, and since when."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s  # watch.progress_stall_s
        self.last: tuple[int, int] = (-1, -1)
        self.since = 0.0

    def stalled(self, d: Driver, now: float, runnable: Callable[[], str]) -> str | None:
        sig = (d.stream.tokens, d.active)
        if sig != self.last or d.active == 0:
            self.last, self.since = sig, now
            return None
        if now - self.since <= self.stall_s:
            return None
        return (
            f"stalled: {d.active} requests outstanding and no token committed for "
            f"{now - self.since:.1f} virtual s (watch.progress_stall_s={self.stall_s}); "
            f"runnable: {runnable()}"
        )
