"""The explorer's first real catch, kept as a regression test.

`python -m ppx.study admission_matrix` crashed one run in ten on gloo (forwarded admission,
on_refusal=void, rank 1's pool skewed to 400 tokens): rank 1 raised `KV pool exhausted` in
`scheduler.place` from `decision.apply`, and nothing could bring that timing back. The
explorer found it at pp=3 (`explore.strategy=pct`, schedule 7 of 150, model=micro):

    python -m ppx.explore pp=3 model=micro engine/ordering=decision_first faults=pool_skew \\
      faults.pool.tokens=400 workload.num_prefixes=4 workload.num_requests=24 \\
      workload.concurrency=4 workload.max_new=8 engine.liveness.livelock_passes=32 \\
      engine/admission=forwarded engine/guard=rid engine.admission.on_refusal=void \\
      explore.strategy=pct explore.schedules=150

Its schedule is tests/data/schedules/forwarded_pool_exhausted.txt. A follower that cannot
allocate what it is told must refuse (void the pass), never raise. The root: the admission
check counted the slots of the prefix the request was about to lock as evictable
(`Scheduler.pin_cost`, tests/test_pool_exhaustion.py).
"""

from __future__ import annotations

import os

from ppx_helpers import compose

from ppx.sim.schedule import load
from ppx.sim.strategy import RandomStrategy, ReplayStrategy
from ppx.sim.world import SimSupervisor

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEDULE = os.path.join(HERE, "..", "data", "schedules", "forwarded_pool_exhausted.txt")


def replay_prefix(seed: int) -> dict:
    s = load(SCHEDULE)
    # the schedule's own overrides, minus how it was explored; the config hash is not
    # checked here on purpose: the engine under the schedule is what this test changes
    cfg = compose(*[o for o in s.overrides if not o.startswith("explore.")], "engine.transport=sim")
    sup = SimSupervisor(cfg, None, ReplayStrategy(s.choices, then=RandomStrategy(seed)))
    out = sup.run()
    out["strategy"] = sup.strategy
    return out


def test_the_found_schedule_no_longer_crashes():
    out = replay_prefix(seed=0)
    assert out["verdict"] == "served", out["reason"]


def test_the_schedule_drives_the_run_to_its_recorded_end():
    """The saved choices still steer the run: until the engine changes under them, the
    replay reaches the crash without leaving the recording; once fixed, the run serves."""
    out = replay_prefix(seed=0)
    if out["verdict"] == "crashed":
        assert "KV pool exhausted" in out["reason"], out["reason"]
        assert out["strategy"].diverged_at is None
    else:
        assert out["verdict"] == "served", out["reason"]
