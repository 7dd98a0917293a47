"""The `crashed` paths of real spawned ranks: a rank that raises, and ranks that never leave.

Neither is something a configuration can ask for (a `crashed` verdict in an offered
configuration is a bug), so the bug is planted from outside: a `sitecustomize` module on the
spawned ranks' PYTHONPATH patches the rank code at interpreter start-up. The ranks are real
processes over real gloo, so this covers what the simulator's in-process monkeypatch cannot:
the exception crossing a process boundary into the rank report, and the supervisor's own
teardown of ranks that ignore the shutdown.
"""

from __future__ import annotations

import os

GLOO = ["+exp=micro_load", "engine.transport=gloo", "pp=2", "workload.num_requests=4"]
# the plant runs at interpreter start-up, so each rank must be a fresh interpreter: a
# forkserver child is a fork of a process that started before the plant existed
PLANTED = [*GLOO, "engine.start_method=spawn"]

RAISE_IN_RANK1 = """
    import ppx.engine.process as rank_mod
    from ppx.engine.scheduler import Scheduler

    _main = rank_mod.rank_main

    def rank_main(a):  # the spawn target is looked up by name, so this one runs
        os.environ["PPX_RANK"] = str(a.rank)
        return _main(a)

    rank_mod.rank_main = rank_main

    _real = Scheduler.apply_output

    def apply_output(self, slot, tokens):
        if os.environ.get("PPX_RANK") == "1":  # one rank's bug; its peer only sees it leave
            raise RuntimeError("planted in rank 1")
        return _real(self, slot, tokens)

    Scheduler.apply_output = apply_output
"""

NEVER_LEAVE = """
    import time

    from ppx.engine.rank import RankLoop

    _real = RankLoop.run

    def run(self):
        _real(self)
        time.sleep(3600)  # served, told to shut down, and still here

    RankLoop.run = run
"""


def test_an_exception_in_a_spawned_rank_is_crashed_naming_that_rank(engine, plant):
    plant(RAISE_IN_RANK1)
    s, _ = engine(*PLANTED)
    assert s["verdict"] == "crashed"
    # the first failure, not rank 0's secondary "Connection closed by peer"
    assert s["reason"] == "rank1: RuntimeError: planted in rank 1"
    assert s["submitted"] == s["served"] + s["refused"] + s["lost"]


def test_ranks_that_do_not_leave_after_the_shutdown_are_crashed_and_killed(engine, plant):
    plant(NEVER_LEAVE)
    s, d = engine(*PLANTED, "watch.shutdown_grace_s=2")
    # every request was served; what failed is the ranks' exit, and the teardown still
    # reaps them (the fixture asserts no rank pid outlives the run)
    assert (s["verdict"], s["reason"]) == ("crashed", "ranks did not leave after shutdown")
    assert s["served"] == s["submitted"] == 4


def test_a_forkserver_rank_sees_the_environment_of_its_run_not_of_the_first_run(
    engine, monkeypatch
):
    # the first run starts the forkserver (once per process); PPX_DEBUG is set only after it
    s, _ = engine(*GLOO)
    assert s["verdict"] == "served"
    monkeypatch.setenv("PPX_DEBUG", "1")
    s, d = engine(*GLOO)
    assert s["verdict"] == "served"
    with open(os.path.join(d, "ranks", "rank0.log")) as f:
        assert "[trace rank0" in f.read()  # the debug tracer, switched on by this run's env
