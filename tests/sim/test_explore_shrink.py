"""Every saved failure is shrunk (fewest delays, then fewest choice points; each candidate
run, the result replayed exactly) and the original is kept beside it."""

from __future__ import annotations

import json
import os

from explore_helpers import explore_in
from ppx_helpers import QUEUE_ORDER

from ppx.sim.runner import Result
from ppx.sim.scheduler import Scheduler
from ppx.sim.shrink import GuidedStrategy, deviations, shrink
from ppx.sim.strategy import RandomStrategy, ReplayStrategy


class RaceRunner:
    """Three tasks of five steps each; the run fails when task 2 starts before task 0 ends.
    The lowest-runnable schedule runs task 0 to its end first, so the smallest failing
    schedule has one deviation: task 2 chosen once over tasks 0 and 1 (two delays)."""

    def run(self, strategy) -> Result:
        sched = Scheduler(strategy, 1e-3, 1000, 1e6)
        log: list[tuple[int, int]] = []

        def task(tid: int):
            def go():
                for i in range(5):
                    log.append((tid, i))
                    sched.point("step")

            return go

        for t in range(3):
            sched.spawn(f"t{t}", task(t))
        assert sched.run() == "done"
        bad = log.index((2, 0)) < log.index((0, 4))
        row = {"verdict": "crashed" if bad else "served", "reason": "race", "cycle": None}
        return Result(row, list(sched.choices))


def test_a_random_failure_shrinks_to_its_one_needed_deviation():
    runner = RaceRunner()
    found = next(
        r for r in (runner.run(RandomStrategy(s)) for s in range(50)) if r.verdict != "served"
    )
    assert len(deviations(found.choices)) > 1  # as found: several needless deviations
    s = shrink(runner, found, budget=100)
    assert s.replayed and s.delays == (found.delays, 2) and s.delays[0] > 2
    assert len(deviations(s.choices)) == 1
    again = runner.run(ReplayStrategy(s.choices))
    assert again.key == found.key and again.choices == s.choices
    # 1-minimal: without its one deviation the run serves
    assert runner.run(GuidedStrategy({})).verdict == "served"


def test_the_explorer_saves_every_failure_shrunk_beside_the_original(tmp_path):
    order = [
        *QUEUE_ORDER,
        "engine.admission.batch_order=queue",
        "explore.schedules=3",
    ]
    ex = explore_in(tmp_path / "on", *order)
    (f,) = ex.failures.values()
    d = os.path.dirname(ex.paths[f.key])
    meta = json.load(open(os.path.join(d, "failure.json")))
    assert meta["shrink"]["replayed"] and meta["shrink"]["delays"][1] < meta["shrink"]["delays"][0]
    assert f.original != f.choices
    assert open(os.path.join(d, "original.txt")).read() != open(ex.paths[f.key]).read()
    # red: with shrinking off the saved schedule is the one found
    off = explore_in(tmp_path / "off", *order, "explore.shrinker.runs=0")
    (g,) = off.failures.values()
    d = os.path.dirname(off.paths[g.key])
    assert open(os.path.join(d, "original.txt")).read() == open(off.paths[g.key]).read()
    assert g.original == f.original  # the same schedule was found first
