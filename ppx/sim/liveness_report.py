"""A fair cycle's states in the post-mortem's terms, and the file that keeps them.

Per state of the lap, per rank: what its task waits for (the post-mortem's blocked-on
label), the rids it holds and where (`Scheduler.places`: the waiting queue, a continuation
cell, slot s, in flight in slot s), and on rank 0 the last voided pass's (rid, told, local)
row -- the void streak's entry, as the livelock bound names it.
"""

from __future__ import annotations

import json
import os

from ppx.engine.rank import RankLoop
from ppx.sim.fingerprint_forms import stack_of

FILE = "livelock.json"  # beside summary.json


def rank_loops(sched) -> dict[int, RankLoop]:
    """Each live rank task's RankLoop, found in its suspended frames."""
    out: dict[int, RankLoop] = {}
    for t in sched.tasks:
        if t.done or t.glet is None:
            continue
        for fr in stack_of(t.glet.gr_frame):
            loop = next((v for v in fr.f_locals.values() if isinstance(v, RankLoop)), None)
            if loop is not None:
                out[t.tid] = loop
                break
    return out


def describe(sched) -> dict:
    """One state of the lap: per task its wait, per rank its rids, slots and told rows."""
    loops = rank_loops(sched)
    ranks = []
    for t in sched.tasks:
        row: dict = {"task": t.name, "waits": t.label or ("done" if t.done else "runnable")}
        loop = loops.get(t.tid)
        if loop is not None:
            s = loop.ctx.sched
            row["num_slots"] = loop.num_slots
            row["rids"] = {str(rid): where for rid, where in sorted(s.places().items())}
            row["slots"] = {
                str(i): [e.rid for e in b.entries] for i, b in enumerate(s.inflight) if b
            }
            streak = getattr(loop.seams.returns, "void_streak", None)
            if streak:  # rank 0: the last voided pass's (rid, told, local)
                row["told_local"] = list(streak[-1])
        ranks.append(row)
    return {"tasks": ranks}


def write(out_dir: str, cycles: list[dict]) -> str:
    path = os.path.join(out_dir, FILE)
    with open(path, "w") as f:
        json.dump(cycles, f, indent=1, default=str)
    return path
