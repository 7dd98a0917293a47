"""Orderings as config: each historical ordering wedges for real over gloo, with the cycle
its reference commit describes; decision_first serves; the watchdog has no false positives."""

from __future__ import annotations

import os

import pytest
from fr_trace import analyzer_edges, cycle_edges, torchfrtrace
from ppx_helpers import ROOT, run_ppx, shape

SMALL = ["workload.num_requests=6", "workload.max_new=4", "watch.stall_s=3"]


WEDGES = {
    # f31fd5e: rank 0 flushes the chain before the decision; followers wait for the decision
    "flush_before_decision": "rank0 -[flush chain]-> rank1 -[recv decision]-> rank0",
    # before sgl-project#796: rank 0 blocks on the lap of a decision it has not sent
    "blocking_lap": "rank0 -[recv lap]-> rank2 -[recv decision]-> rank1 -[recv decision]-> rank0",
    # before sgl-project#795: the proxy crossing completes before the decision is sent
    "decision_after_launch": "rank0 -[flush proxy]-> rank1 -[recv decision]-> rank0",
}


@pytest.mark.parametrize("ordering", sorted(WEDGES))
def test_historical_ordering_wedges_with_its_cycle(engine, ordering):
    s, run_dir = engine("pp=3", "engine/admission=decision", f"engine/ordering={ordering}", *SMALL)
    assert s["verdict"] == "wedged"
    assert shape(s["cycle"]) == WEDGES[ordering]
    pm = os.path.join(run_dir, "postmortem")
    for f in (
        "cycle.txt",
        "waitfor.png",
        "waitfor.json",
        "blocked_on.json",
        "last_events.json",
        "ledger.json",
        "ops.parquet",
        "stacks/rank0.txt",
        "stacks/rank2.txt",
    ):
        assert os.path.exists(os.path.join(pm, f)), f
    assert open(os.path.join(pm, "cycle.txt")).read().strip() == s["cycle"]
    # a wedge is every rank blocked for the whole stall window (watch.stall_s=3), never less
    assert all(b is not None and b["since_s"] >= 3 for b in s["blocked_on"])
    # torch's Flight Recorder analyzer, on the dumps built from the same record, names the
    # cycle's waits (tests/test_flight_recorder.py holds its red arm)
    rep = torchfrtrace(os.path.join(pm, "flight_recorder"))
    assert rep.returncode == 0, rep.stderr
    assert cycle_edges(s["cycle"]) <= analyzer_edges(rep.stdout + rep.stderr)
    # torch's own recorder's dumps beside ppx's, one per rank (gloo records collectives only)
    fr = os.listdir(os.path.join(pm, "flight_recorder"))
    assert sorted(f for f in fr if f.startswith("torch_fr_")) == [f"torch_fr_{r}" for r in range(3)]


@pytest.mark.parametrize("workload", ["shared_prefix", "random"])
def test_decision_first_serves_what_the_wedging_presets_fail_on(engine, workload):
    s, _ = engine(
        "pp=3",
        "engine/admission=decision",
        "engine/ordering=decision_first",
        f"workload={workload}",
        *SMALL,
    )
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0


def test_a_slowed_rank_is_a_straggler_never_a_wedge(engine):
    s, _ = engine(
        "pp=3",
        "faults=slow_rank",
        "faults.delay.s=0.3",
        "workload.num_requests=6",
        "workload.max_new=4",
        "watch.stall_s=1",
    )
    assert s["verdict"] == "served", s["reason"]


def test_a_killed_rank_is_a_dead_peer_not_a_wedge(engine):
    s, _ = engine(
        "pp=3",
        "faults=kill_rank",
        "faults.kill.after_s=3",
        "workload.num_requests=200",
        "watch.stall_s=2",
    )
    assert s["verdict"] == "dead_peer"
    # the supervisor reaps the killed rank before its peers' errors reach their reports
    assert s["reason"] == "rank1 exited with code -9 and no report"


def test_user_written_ordering_yaml_works(tmp_path):
    conf = os.path.join(ROOT, "tests", "data", "user_conf")
    proc, s = run_ppx(
        str(tmp_path / "user"),
        f"hydra.searchpath=[file://{conf}]",
        "pp=2",
        "engine/admission=decision",
        "engine/ordering=lap_before_output",
        *SMALL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert s["verdict"] == "served" and s["choices"]["ordering"] == "lap_before_output"


def test_an_ordering_without_a_required_step_is_rejected_before_spawn(tmp_path):
    proc, s = run_ppx(str(tmp_path / "bad"), "engine.ordering.steps=[chain,schedule,launch,flush]")
    assert proc.returncode != 0 and "lacks the 'output' step" in proc.stderr and s is None
