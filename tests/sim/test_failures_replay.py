"""Failures that can be trusted (issue 30): one bug is one failure key with the count of
schedules that hit it, a shrunk schedule is never longer than the one found, a post-mortem
names a cycle only among blocked ranks, and every failure replays from its file alone
(`python -m ppx.replay FILE`), the oracle's mismatch included."""

from __future__ import annotations

import json
import os

import pytest
from hydra import compose, initialize_config_dir
from mutants_lost import DROP_VOIDED_SRC, PAUSE_FOREVER_SRC, plant
from ppx_helpers import ROOT, SHORT_SKEW, assert_refused

from ppx.replay import main as replay
from ppx.sim.explore import explore
from ppx.sim.runner import failure_key
from ppx.sim.schedule import load
from ppx.sim.shrink import smaller
from ppx.validation import validate

VOIDS = [
    "pp=2",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "engine/guard=rid",
    *SHORT_SKEW,
]


def explorer(*overrides: str):
    with initialize_config_dir(config_dir=os.path.join(ROOT, "conf"), version_base=None):
        return validate(compose(config_name="explorer", overrides=list(overrides)))


def test_failure_keys_blank_what_varies_and_keep_the_ranks_and_operations():
    a = failure_key("wedged", "", "rank0 -[flush chain]-> rank1 -[recv decision slot=0]-> rank0")
    b = failure_key("wedged", "", "rank0 -[flush chain]-> rank1 -[recv decision slot=2]-> rank0")
    c = failure_key("wedged", "", "rank1 -[flush chain]-> rank2 -[recv decision slot=0]-> rank1")
    assert a == b != c
    lost = "lost: rid {} left slot {} at pass {} and is held nowhere on rank 0"
    assert failure_key("lost", lost.format(3, 1, 40), None) == failure_key(
        "lost", lost.format(7, 0, 112), None
    )
    # the rids outstanding: a stall with three is the stall a scenario of fewer has
    stall = "stalled: {} requests outstanding {}, no token committed for 9 passes"
    three = failure_key("stalled", stall.format(3, [0, 2, 3]), None)
    assert three == failure_key("stalled", stall.format(1, [4]), None)
    assert three.endswith("outstanding [#, ...], no token committed for # passes")
    # red arm: a livelock's repeating rows stay whole (another row is another livelock)
    rows = "repeating: [(0, 16, 0), (2, 16, 0)]"
    assert failure_key("livelocked", rows, None) != failure_key(
        "livelocked", rows[:-17] + "]", None
    )


def test_shrinking_accepts_no_candidate_that_is_longer():
    assert smaller((0, 35), (2, 35)) and smaller((2, 30), (2, 35))
    assert not smaller((0, 58), (2, 35))  # fewer delays, more choice points: refused
    assert not smaller((2, 35), (2, 35))


@pytest.fixture
def planted(monkeypatch):
    from ppx.engine.scheduler import Scheduler

    for name in ("void", "add"):
        monkeypatch.setattr(Scheduler, name, getattr(Scheduler, name))  # undone after the test
    return plant


def test_one_planted_bug_is_one_failure_with_its_count_shrunk_no_longer_and_replayed(
    tmp_path, planted
):
    planted(DROP_VOIDED_SRC)
    overrides = [*VOIDS, "engine.transport=sim", "logger=none", "explore.schedules=12"]
    overrides += ["explore.shrinker.runs=20"]
    cfg = explorer(*overrides)
    ex = explore(cfg, str(tmp_path), overrides, echo=lambda *_: None, config_name="explorer")
    assert list(ex.failures) == ["lost: lost: rid # left the pass in flight on slot # at pass # "
                                 "and is held nowhere on rank # (pass #; outstanding [#, ...])"] or (
        len(ex.failures) == 1 and next(iter(ex.failures)).startswith("lost: lost: rid # left ")
    ), list(ex.failures)  # fmt: skip
    ((key, f),) = ex.failures.items()
    assert (ex.table["verdict"] == "lost").sum() == 12  # every schedule hits the one bug
    summary = json.load(open(tmp_path / "failures" / "0" / "failure.json"))
    assert summary["verdict"] == "lost"
    assert len(f.choices) <= len(f.original)
    # the saved schedule replays from the file alone, the explorer's config name included
    sch = load(str(tmp_path / "failures" / "0" / "schedule.txt"))
    assert sch.config_name == "explorer" and sch.verdict == "lost" and sch.config is not None
    assert (
        replay([str(tmp_path / "failures" / "0" / "schedule.txt"), "--out", str(tmp_path / "r")])
        == 0
    )


def test_a_mismatch_is_recorded_as_such_and_replays_from_its_file(tmp_path, engine, capsys):
    s, run_dir = engine("pp=3", "engine.transport=sim", "model=hash", "faults=corrupt_token")
    assert s["verdict"] == "mismatch", s
    sch = load(os.path.join(run_dir, "schedule.txt"))
    assert sch.verdict == "mismatch" and sch.reason.startswith("oracle: rid 0 token 1")
    assert replay([os.path.join(run_dir, "schedule.txt"), "--out", str(tmp_path / "r")]) == 0
    assert "-> reproduced" in capsys.readouterr().out
    # ppx.run with the file and other overrides: the refusal prints the command that works
    assert_refused(
        ["engine.transport=sim", f"explore.replay={os.path.join(run_dir, 'schedule.txt')}"],
        f"replay it from the file alone: python -m ppx.replay {os.path.join(run_dir, 'schedule.txt')}",
    )


def test_a_stall_names_no_cycle_but_the_runnable_ranks(engine, planted):
    planted(PAUSE_FOREVER_SRC)
    s, run_dir = engine("pp=3", "engine.transport=sim", "model=hash", "workload.num_requests=4")
    assert s["verdict"] == "stalled" and not s.get("cycle"), s
    text = open(os.path.join(run_dir, "postmortem", "cycle.txt")).read()
    # rank 0 stopped the run; rank 1 waits on it (no cycle); rank 2 was parked runnable
    assert text.startswith("no cycle: ") and " runnable (last: " in text, text
