"""Ending a run's child processes: no rank outlives its run, on any exit path."""

from __future__ import annotations

import contextlib
import os
import signal
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


def descendants(root: int | None = None) -> dict[int, str]:
    """The live (not zombie) processes below `root` (this process), pid -> name, read from
    /proc: what a helper that starts its own processes (a Ray head) left running."""
    parent, name = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:  # it exited meanwhile
            continue
        comm, rest = stat.split("(", 1)[1].rsplit(")", 1)  # the name may hold spaces
        state, ppid = rest.split()[:2]
        if state != "Z":
            parent[int(entry)], name[int(entry)] = int(ppid), comm
    out: dict[int, str] = {}
    frontier = {os.getpid() if root is None else root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out.update({p: name[p] for p in frontier})
    return out


def kill_new(before: dict[int, str]) -> None:
    """SIGKILL the descendants of this process that `before` (a `descendants()`) lacked."""
    for pid in set(descendants()) - set(before):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
