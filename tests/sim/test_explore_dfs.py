"""dfs over the step-bounded tree: the sleep-set reduction explores fewer schedules and
reaches every end the plain tree reaches (the red arm: a reduction that takes every pair of
steps for independent loses some); the delay bound; dfs shards cover the same tree."""

from __future__ import annotations

from explore_helpers import SMALL_DFS, explore_in, explorer_cfg, outcomes

import ppx.sim.dfs as dfs
from ppx.sim.dfs import DfsWalker
from ppx.sim.runner import Runner

# decision_first at pp=3 on the explorer's load (4 requests, 4 tokens each): the whole tree
# of its first 12 steps, exhausted with and without the reduction
FIRST = [
    *SMALL_DFS,
    "engine/ordering=decision_first",
    "explore.dfs.bound=12",
    "explore.shrinker.runs=0",
]
ALL = "explore.schedules=100000"  # dfs: until the tree is exhausted


def test_the_reduction_exhausts_decision_first_with_fewer_schedules_and_every_end(tmp_path):
    plain = explore_in(tmp_path / "plain", *FIRST, ALL, "explore.reduce=none")
    sleep = explore_in(tmp_path / "sleep", *FIRST, ALL, "explore.reduce=sleep")
    assert plain.exhausted and sleep.exhausted
    assert plain.dfs["blocked"] == plain.dfs["skipped"] == 0
    assert sleep.covered * 3 < plain.covered, (sleep.dfs, plain.dfs)
    assert sleep.dfs["blocked"] + sleep.dfs["skipped"] > 0  # what it pruned, counted
    # schedules of the plain tree end in several ways; the reduced tree reaches every one
    assert len(outcomes(plain)) > 1
    assert outcomes(plain) == outcomes(sleep)
    assert set(plain.table["verdict"]) == {"served"}


def test_the_reduction_never_loses_a_wedge_plain_dfs_finds(tmp_path, monkeypatch):
    lap = [
        *SMALL_DFS,
        "engine/ordering=blocking_lap",
        "explore.dfs.bound=12",
        "explore.shrinker.runs=0",
        ALL,
    ]
    plain = explore_in(tmp_path / "plain", *lap, "explore.reduce=none")
    sleep = explore_in(tmp_path / "sleep", *lap, "explore.reduce=sleep")
    assert set(plain.table["verdict"]) == {"wedged"} and len(outcomes(plain)) > 1
    assert outcomes(sleep) == outcomes(plain) and sleep.covered < plain.covered
    assert set(sleep.failures) == set(plain.failures)
    # red: a reduction that calls every pair of steps independent prunes ends away
    monkeypatch.setattr(dfs, "dependent", lambda a, b: False)
    broken = explore_in(tmp_path / "broken", *lap, "explore.reduce=sleep")
    assert outcomes(broken) < outcomes(plain)


def delays(choices) -> int:
    return sum(bin(mask & ((1 << tid) - 1)).count("1") for tid, mask in choices)


def test_the_delay_bound_limits_each_schedule_and_exhausts(tmp_path):
    base = [*SMALL_DFS, "engine/ordering=blocking_lap", "explore.reduce=none", ALL]
    runs = {}
    for k in (0, 1, 2):
        ex = explore_in(
            tmp_path / f"d{k}", *base, f"explore.dfs.delays={k}", "explore.shrinker.runs=0"
        )
        assert ex.exhausted
        runs[k] = ex.covered
    assert runs[0] == 1 < runs[1] < runs[2]  # delays=0: the lowest-runnable schedule alone
    # every schedule of the delays=1 tree spends at most one delay, and some spend one
    cfg = explorer_cfg(*base, "explore.dfs.delays=1")
    runner, w, spent = Runner(cfg), DfsWalker(0, False, 1), []
    while not w.exhausted:
        res = runner.run(w.strategy())
        w.record(blocked=res is None)
        spent.append(delays(res.choices))
    assert max(spent) == 1 and spent.count(0) == 1 and len(spent) == runs[1]


def test_dfs_shards_walk_the_same_tree_as_one_worker(tmp_path):
    one = explore_in(tmp_path / "one", *FIRST, ALL)
    two = explore_in(tmp_path / "two", *FIRST, ALL, "explore.fanout.workers=2")
    assert one.exhausted and two.exhausted
    assert two.covered == one.covered and outcomes(two) == outcomes(one)
    assert sorted(two.table["schedule"]) == list(range(len(two.table)))


def test_a_schedule_found_on_the_idle_clock_replays_with_its_printed_command(tmp_path):
    import shlex

    import pytest
    from explore_helpers import replay

    from ppx.config import ConfigError
    from ppx.sim.report import replay_command
    from ppx.sim.runner import failure_key

    lap = [*SMALL_DFS, "engine/ordering=blocking_lap", "explore.dfs.bound=6", ALL]
    ex = explore_in(tmp_path / "ex", *lap)
    ((key, path),) = ex.paths.items()
    cmd = shlex.split(replay_command(lap, path, "explorer"))
    assert cmd[:5] == ["python", "-m", "ppx.run", "--config-name", "explorer"]
    assert "explore.clock=idle" in cmd  # the clock shapes the run: the replay keeps it
    s = replay(tmp_path / "run", [c for c in cmd[5:] if not c.startswith("explore.replay=")], path)
    assert s["verdict"] == "wedged" and key == failure_key("wedged", "", s["cycle"])
    # red: the same schedule on the step clock is another config, refused before it runs
    with pytest.raises(ConfigError, match="recorded for another config"):
        same = [c for c in cmd[5:] if not c.startswith(("explore.replay=", "explore.clock="))]
        replay(tmp_path / "step", same, path)
