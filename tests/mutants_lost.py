"""Two bug shapes that lose a request and leave every task runnable (issue 30), kept as
test-only plants: applied in-process on the simulator (`plant_*`), or by a sitecustomize in
spawned gloo ranks (the `*_SRC` bodies, run at interpreter start-up)."""

from __future__ import annotations

# a voided pass re-queues its requests; this requeue forgets the first one it put back
DROP_VOIDED_SRC = """
from ppx.engine.scheduler import Scheduler

_void = Scheduler.void

def void(self, batch, keep=frozenset()):
    requeued = _void(self, batch, keep)
    if requeued and not getattr(self, "dropped_one", False):  # once per run and rank
        self.dropped_one = True
        self.waiting.remove(requeued[0])  # re-queued nowhere: the bug
    return requeued

Scheduler.void = void
"""

# a cutover re-queues every resident; this one forgets the last slot's running batch
FORGET_RESIDENTS_SRC = """
from ppx.engine.flip import FlipControl

_cutover = FlipControl.cutover

def cutover(self, pass_id):
    s = self.ctx.sched
    for slot in reversed(s.running):
        if slot:
            slot.clear()  # the last occupied slot's residents: re-queued nowhere (the bug)
            break
    return _cutover(self, pass_id)

FlipControl.cutover = cutover
"""


def plant(src: str) -> None:
    """Apply a plant in this process (the simulator runs every rank here)."""
    exec(compile(src, "<plant>", "exec"), {})


# a pause (a flip announced) that is never lifted: rank 0 keeps passing, schedules nothing
PAUSE_FOREVER_SRC = """
from ppx.engine.scheduler import Scheduler

_add = Scheduler.add

def add(self, reqs):
    _add(self, reqs)
    if self.reqs:
        self.paused = True  # the bug: nothing new is ever scheduled again

Scheduler.add = add
"""
