"""Ending a run's child processes: no rank outlives its run, on any exit path."""

from __future__ import annotations

import time
from collections.abc import Iterable


def stop_children(procs: list, grace_s: float, mirror=None, queues: Iterable = ()) -> None:
    """Wait up to `grace_s` for the ranks to leave by themselves (they were told to shut down),
    then terminate, then kill what is left. A remote node's ranks (`mirror`, under torchrun)
    are joined through their agents, which publish exit and report. The queues are closed
    without joining their feeder threads: a rank that died mid-put leaves one that never
    drains."""
    deadline = time.time() + grace_s
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.time()))
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=2.0)
        if p.is_alive():
            p.kill()
            p.join(timeout=2.0)
    if mirror is not None:
        for p in mirror.remote:
            p.join(timeout=10.0)
        mirror.close()
    for q in queues:
        if q is not None:
            q.cancel_join_thread()
            q.close()
