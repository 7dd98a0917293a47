"""Fan-out: schedules sharded over local workers or Hydra launcher jobs merge into the table
one worker writes, a failure keeps its lowest index; pct cycles its depth; a portfolio runs
its members side by side."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from explore_helpers import explore_in, explorer_cfg
from ppx_helpers import ROOT

from ppx.sim.merge import merge
from ppx.sim.runner import Runner
from ppx.sim.shard import Failure, Plan, ShardResult

LAP = ["pp=3", "engine/admission=decision", "engine/ordering=blocking_lap"]
SAME = ["schedule", "strategy", "verdict", "reason", "cycle", "tokens", "steps", "virtual_s"]


def test_workers_run_the_same_schedules_as_one(tmp_path):
    for arm in (LAP, ["pp=3", "engine/admission=decision", "engine/ordering=decision_first"]):
        one = explore_in(tmp_path / "one", *arm, "explore.schedules=8")
        two = explore_in(tmp_path / "two", *arm, "explore.schedules=8", "explore.fanout.workers=2")
        assert two.workers == 2 and list(two.table["schedule"]) == list(range(8))
        pd.testing.assert_frame_equal(two.table[SAME], one.table[SAME])
        assert {k: f.index for k, f in two.failures.items()} == {
            k: f.index for k, f in one.failures.items()
        }


def failure(index: int) -> Failure:
    return Failure("wedged: x", index, "random", index, "wedged", "r", [(0, 3)], [(0, 3)], {})


def test_a_failure_found_by_several_shards_keeps_its_lowest_index():
    a = ShardResult(0, [{"schedule": 0}, {"schedule": 2}], {"wedged: x": failure(2)})
    b = ShardResult(1, [{"schedule": 1}, {"schedule": 3}], {"wedged: x": failure(1)})
    for order in ([a, b], [b, a]):
        ex = merge(order, 1.0)
        assert [r["schedule"] for r in ex.rows] == [0, 1, 2, 3]
        assert ex.failures["wedged: x"].index == 1


def test_pct_cycles_its_depth_per_schedule_and_calibrates_its_horizon():
    for cycle, want in (("true", [1, 2, 3, 1, 2, 3]), ("false", [3] * 6)):
        cfg = explorer_cfg(*LAP, "explore.strategy=pct", "explore.schedules=6",
                           f"explore.pct.depth_cycle={cycle}")  # fmt: skip
        plan = Plan(cfg, 0, 1, Runner(cfg))
        strategies = [s for _, _, s, _ in plan.schedules()]
        assert [len(s.change) + 1 for s in strategies] == want  # d - 1 change points
        assert 0 < plan.horizon < 100  # one run's choice points, not 20000


def test_a_portfolio_runs_its_members_side_by_side(tmp_path):
    ex = explore_in(
        tmp_path, *LAP, "explore.strategy=portfolio", "explore.portfolio=[random,pct,dfs]",
        "explore.dfs.bound=6", "explore.reduce=none", "explore.schedules=9",
    )  # fmt: skip
    df = ex.table
    assert list(df["strategy"]) == ["random", "pct", "dfs"] * 3
    assert list(df["schedule"]) == list(range(9)) and set(df["verdict"]) == {"wedged"}
    assert ex.dfs is not None and ex.dfs["runs"] == 3


def run_cli(*args: str, timeout: float = 300):
    cmd = [sys.executable, "-m", "ppx.explore", *args, "logger=none"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


KEYS = {"schedules", "wall_s", "schedules_per_s", "verdicts", "tokens_checked", "failures"}


def test_launcher_jobs_are_shards_that_merge_into_the_sweep_dir(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    sweep = tmp_path / "sweep"
    proc = run_cli(
        "-m", "hydra/launcher=submitit_local", f"hydra.sweep.dir={sweep}", *LAP,
        "explore.schedules=6", "explore.fanout.shards=2", "explore.fanout.shard=0,1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "merged 2 shards" in proc.stdout
    jobs = [json.loads((sweep / j / "summary.json").read_text()) for j in ("0", "1")]
    assert sorted(j["shard"] for j in jobs) == [0, 1] and [j["schedules"] for j in jobs] == [3, 3]
    s = json.loads((sweep / "summary.json").read_text())
    assert KEYS <= set(s) and s["schedules"] == 6 and s["verdicts"] == {"wedged": 6}
    merged = pd.read_parquet(sweep / "explore.parquet")
    one = explore_in(tmp_path / "one", *LAP, "explore.schedules=6")
    pd.testing.assert_frame_equal(merged[SAME], one.table[SAME])
    (key,) = s["failures"]
    assert json.loads((sweep / "failures" / "0" / "failure.json").read_text())["index"] == 0
