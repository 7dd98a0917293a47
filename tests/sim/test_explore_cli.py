"""`python -m ppx.explore` as a user runs it: the table, the summary, the saved failure and a
replay command that, pasted, reproduces the failure as a full run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pandas as pd
from ppx_helpers import ROOT

from ppx.sim.runner import failure_key

BASE = ["+exp=micro_load", "pp=3", "engine/admission=decision", "logger=none"]


def explore(out_dir, *overrides):
    args = [sys.executable, "-m", "ppx.explore", f"hydra.run.dir={out_dir}", *BASE, *overrides]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_explore_writes_table_summary_and_a_replayable_failure(tmp_path):
    out = tmp_path / "ex"
    proc = explore(
        out,
        "engine/ordering=decision_after_launch",
        "explore.strategy=pct",
        "explore.schedules=6",
        "explore.fanout.batch=3",
        "explore.fanout.workers=2",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for w in (0, 1):  # two worker processes, three schedules each, one table
        assert proc.stdout.count(f"ppx.explore: worker {w}/2: 3/3") == 1, proc.stdout
    table = pd.read_parquet(out / "explore.parquet")
    assert list(table.columns) == [
        "schedule",
        "strategy",
        "verdict",
        "reason",
        "cycle",
        "tokens",
        "served",
        "tokens_checked",
        "steps",
        "virtual_s",
        "end",  # the end record (ppx/sim/ends.py)
        "end_tokens",
        "end_commits",
        "reason_key",
    ]
    assert len(table) == 6 and set(table["verdict"]) == {"wedged"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frac_wedged"] == 1.0 and summary["explored"] == summary["schedules"] == 6
    assert summary["verdicts"] == {"wedged": 6} and summary["schedules_per_s"] > 0
    assert summary["workers"] == 2 and summary["tokens_checked"] == 0  # nothing served
    # one saved (shrunk) schedule per distinct cycle (slot numbers blanked: one bug, one
    # key), in the order they were first met, with the count of schedules that hit it
    keys = [failure_key("wedged", "", c) for c in table["cycle"]]
    assert list(summary["failures"]) == list(dict.fromkeys(keys))
    assert summary["failure_counts"] == {k: keys.count(k) for k in dict.fromkeys(keys)}
    replay = next(line for line in proc.stdout.splitlines() if "replay: " in line)
    cmd = shlex.split(replay.split("replay: ", 1)[1])
    assert cmd[:3] == ["python", "-m", "ppx.replay"] and len(cmd) == 4  # the file alone
    run_dir = tmp_path / "replayed"
    again = subprocess.run(
        [sys.executable, *cmd[1:], "--out", str(run_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    s = json.loads((run_dir / "summary.json").read_text())
    assert again.returncode == 0 and s["verdict"] == "wedged", again.stdout + again.stderr
    assert failure_key("wedged", "", s["cycle"]) == keys[0]
    assert os.path.exists(run_dir / "postmortem" / "waitfor.png")


def test_explore_refuses_bad_strategies_before_running(tmp_path):
    for extra, words in (
        (["explore.strategy=bogus"], "explore.strategy='bogus'"),
        (["explore.strategy=dfs"], "needs a bound"),
        (["explore.strategy=replay"], "replay one schedule with python -m ppx.run"),
    ):
        proc = explore(tmp_path / "bad", "engine/ordering=decision_first", *extra)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr[-800:]
        assert not (tmp_path / "bad" / "explore.parquet").exists()


def test_bad_explore_keys_are_refused_in_one_line_before_anything_runs():
    from ppx_helpers import assert_refused

    cases = [
        (["explore.fanout.workers=0"], "explore.fanout.workers=0"),
        (["explore.fanout.shards=2", "explore.fanout.shard=2"], "0 <= shard < shards"),
        (["explore.fanout.shards=2", "explore.fanout.workers=2"], "a launcher job is one shard"),
        (["explore.strategy=portfolio", "explore.portfolio=[random,bogus]"], "explore.portfolio"),
        (["explore.reduce=bogus"], "explore.reduce='bogus'"),
        (["explore.clock=bogus"], "explore.clock='bogus'"),
        (["explore.strategy=dfs", "explore.dfs.delays=1"], "explore.reduce=none"),
        (["explore.strategy=dfs", "explore.dfs.delays=-1", "explore.reduce=none"], "delays=-1"),
        (["explore.shrinker.runs=-1"], "explore.shrinker.runs=-1"),
    ]
    for overrides, words in cases:
        assert_refused(overrides, words)


def test_an_idle_clock_over_a_polled_host_load_gets_a_note(tmp_path):
    # a host load is polled once a pass; on the idle clock it lands only when every rank
    # parks, so the explorer says so before it runs (timing.polls_the_clock)
    host = ["engine/ordering=decision_first", "engine.kv.host_tier=true", "explore.schedules=1"]
    note = "ppx.explore: note: explore.clock=idle with engine.kv.host_tier"
    idle = explore(tmp_path / "idle", *host, "explore.clock=idle")
    assert idle.returncode == 0, idle.stderr[-2000:]
    assert note in idle.stdout
    # red arms: the step clock, and choice timing on the idle clock, land the load
    for arm, extra in (("step", ["explore.clock=step"]),
                       ("choice", ["explore.clock=idle", "faults.timing=choice"])):  # fmt: skip
        proc = explore(tmp_path / arm, *host, *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert note not in proc.stdout
