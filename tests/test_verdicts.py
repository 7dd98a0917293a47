"""Every verdict a run can end with, produced by a real run and pinned to its reason.

`served`, `wedged`, `stopped`, `dead_peer` and `mismatch` have their own protocol tests
(test_orderings, test_admission, test_mismatch, test_oracle); here are the bounds and the
failures: `timeout`, `straggler`, `livelocked` in the TP phase, and `crashed`.
"""

from __future__ import annotations

from ppx_helpers import SHORT_SKEW

TINY = ["+exp=micro_load", "engine.transport=gloo", "pp=2"]


def test_a_run_past_its_bound_is_a_timeout(engine):
    # a closed loop that would go on for ten minutes, bounded at 3 s after boot; a stall
    # window far beyond it keeps "still making progress" true whatever the machine's load
    s, _ = engine(*TINY, "workload.duration_s=600", "watch.max_run_s=3", "watch.stall_s=60")
    assert s["verdict"] == "timeout"
    assert s["reason"] == "watch.max_run_s=3.0 reached (ok)"
    assert s["submitted"] > 0


def test_a_rank_that_never_finishes_its_send_is_a_straggler(engine):
    # rank 0 sleeps (computing, as far as anyone can tell) on its first proxy send: no
    # progress, but not every rank blocked, so never a wedge; the bound ends it. (At pp=2
    # rank 1 is the last rank and sends no proxy: the delay must sit on rank 0.)
    s, _ = engine(
        *TINY,
        "faults=slow_rank",
        "faults.delay.rank=0",
        "faults.delay.s=600",
        "watch.stall_s=1",
        "watch.max_run_s=5",
        "workload.num_requests=2",
    )
    assert s["verdict"] == "straggler"
    assert s["reason"] == "watch.max_run_s=5.0 reached (straggler)"


def test_a_retraction_loop_in_the_tp_phase_livelocks(engine):
    # the admission test's retraction loop (rank 1's pool too small for rank 0's prefixes),
    # with the world held in the TP phase from the start; the simulator fixes the schedule
    s, _ = engine(
        "engine.transport=sim",
        "pp=2",
        "engine/ordering=decision_first",
        "engine/admission=decision",
        "engine/guard=off",
        *SHORT_SKEW,
        "flip=every_40_passes",
        "flip.every_passes=100000",
        "flip.start_phase=tp",
    )
    assert s["verdict"] == "livelocked"
    assert s["reason"].startswith(
        "livelock: 24 consecutive voided passes with no token served (TP phase); "
    )


def test_an_exception_in_a_rank_is_crashed_with_its_first_line(engine, monkeypatch):
    # a rank bug, injected where the simulator runs the rank code in this very process
    from ppx.engine.scheduler import Scheduler

    def broken(self, slot, tokens):
        raise RuntimeError("injected by the test")

    monkeypatch.setattr(Scheduler, "apply_output", broken)
    s, _ = engine("+exp=micro_load", "pp=2")
    assert s["verdict"] == "crashed"
    assert s["reason"] == "rank0: RuntimeError: injected by the test"
