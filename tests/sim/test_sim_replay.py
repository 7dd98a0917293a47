"""Exact replay: a simulated run's schedule.txt re-runs the same choices to the same verdict,
cycle, tokens and events; bad schedules and strategies are refused before anything runs; a
replay that meets another choice point ends `mismatch`, naming the step."""

from __future__ import annotations

import os

import pandas as pd
from ppx_helpers import outputs, run_inproc, run_ppx

SMALL = [
    "pp=3",
    "model=micro",
    "workload.num_requests=6",
    "workload.max_new=5",
    "workload.prefix_len=16",
    "workload.concurrency=3",
    "engine.transport=sim",
]
WEDGE = ["engine/admission=decision", "engine/ordering=blocking_lap"]
SERVE = ["engine/admission=decision", "engine/ordering=decision_first"]


def events(run_dir: str) -> pd.DataFrame:
    return pd.read_parquet(os.path.join(run_dir, "events.parquet"))


def test_same_seed_same_events_other_seed_other_schedule(tmp_path):
    a = run_inproc(str(tmp_path / "a"), *SMALL, *SERVE, "explore.seed=4")
    b = run_inproc(str(tmp_path / "b"), *SMALL, *SERVE, "explore.seed=4")
    c = run_inproc(str(tmp_path / "c"), *SMALL, *SERVE, "explore.seed=5")
    assert a["verdict"] == b["verdict"] == c["verdict"] == "served"
    assert events(str(tmp_path / "a")).equals(events(str(tmp_path / "b")))
    sa = open(tmp_path / "a" / "schedule.txt").read().split("choices", 1)[1]
    sc = open(tmp_path / "c" / "schedule.txt").read().split("choices", 1)[1]
    assert sa != sc
    # another interleaving, the same tokens (the oracle checked both)
    assert outputs(str(tmp_path / "a")) == outputs(str(tmp_path / "c"))
    assert a["choices"]["transport"] == "sim" and a["oracle_mismatches"] == 0


def test_replay_reproduces_verdict_cycle_tokens_and_events(tmp_path):
    for name, arm in (("wedge", WEDGE), ("serve", SERVE)):
        first = run_inproc(str(tmp_path / name), *SMALL, *arm, "explore.strategy=pct")
        path = first["schedule"]
        again = run_inproc(str(tmp_path / f"{name}_replay"), *SMALL, *arm, f"explore.replay={path}")
        assert again["verdict"] == first["verdict"] == ("wedged" if name == "wedge" else "served")
        assert again["cycle"] == first["cycle"]
        assert outputs(str(tmp_path / name)) == outputs(str(tmp_path / f"{name}_replay"))
        # events are identical, t_s included: it is virtual time
        assert events(str(tmp_path / name)).equals(events(str(tmp_path / f"{name}_replay")))


def test_a_diverging_replay_ends_mismatch_naming_the_step(tmp_path):
    first = run_inproc(str(tmp_path / "a"), *SMALL, *SERVE)
    lines = open(first["schedule"]).read().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("choices ")) + 1
    body = " ".join(lines[at:-1]).split()
    # bend one recorded choice to another legal one. Steps that commute may take the run
    # back onto the recorded choice points, so bend them one at a time until the replay
    # meets a choice point that differs (an isend is no choice point: few of them commute)
    for i in range(min(len(body), 12)):
        tid, mask = body[i].split(":")
        others = [t for t in range(int(mask, 16).bit_length()) if int(mask, 16) >> t & 1]
        bent_body = list(body)
        bent_body[i] = f"{next(t for t in others if t != int(tid))}:{mask}"
        bent = tmp_path / f"bent{i}.txt"
        bent.write_text("\n".join([*lines[:at], " ".join(bent_body), "end"]) + "\n")
        s = run_inproc(str(tmp_path / f"b{i}"), *SMALL, *SERVE, f"explore.replay={bent}")
        if s["verdict"] == "mismatch":
            break
    assert s["verdict"] == "mismatch", s["reason"]
    assert "replay diverged" in s["reason"] and "step" in s["reason"]


def test_bad_schedules_and_strategies_are_refused_before_anything_runs(tmp_path):
    good = run_inproc(str(tmp_path / "a"), *SMALL, *WEDGE)["schedule"]
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(open(good).read().splitlines()[:-1]) + "\n")
    cases = [
        (["explore.strategy=bogus"], "explore.strategy='bogus'"),
        (["explore.strategy=dfs"], "needs a bound"),
        ([f"explore.replay={good}", "workload.max_new=6"], "another config"),
        ([f"explore.replay={cut}"], "truncated"),
        ([f"explore.replay={tmp_path / 'none.txt'}"], "cannot read"),
    ]
    for extra, words in cases:
        d = tmp_path / f"bad{len(os.listdir(tmp_path))}"
        proc, summary = run_ppx(str(d), *SMALL, *WEDGE, *extra, timeout=120)
        assert proc.returncode == 2, (extra, proc.stderr[-500:])
        assert words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert summary is None and not (d / "ranks").exists()
