"""Two runs that differ in one protocol sub-switch are told apart everywhere a researcher
groups runs: summary.json's choices, the run store's frame, and the W&B run's config (read
back from the offline transaction log). Before the switch table drove the choices, both runs
below recorded the same choices (`admission=decision ... guard=rid`) and could not be told
apart by any column."""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

import ppx.analysis as pa
from ppx.protocol.registry import CHOICE_NAMES

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
from ppx_helpers import run_ppx  # noqa: E402
from wandb_log import read_log  # noqa: E402

RUN = [
    "engine.transport=sim",
    "+exp=micro_load",
    "pp=2",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "engine/guard=rid",
    "logger.group=apart",
]
ARMS = {"fingerprint": "engine.width_check=fingerprint", "rows": "engine.width_check=rows"}


def test_two_designs_are_recorded_apart_in_the_store_and_in_wandb(tmp_path):
    logged = {}
    for arm, switch in ARMS.items():
        run_dir = str(tmp_path / arm)
        proc, s = run_ppx(run_dir, *RUN, switch, logger="wandb")
        assert s is not None and s["verdict"] == "served", proc.stdout + proc.stderr
        assert s["choices"]["width_check"] == arm
        assert set(CHOICE_NAMES) <= set(s["choices"])  # every switch, flat
        files = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "*.wandb"))
        assert len(files) == 1, files
        logged[arm] = read_log(files[0])
    # the store: one row per run, the sub-switch a column that tells them apart
    runs = pa.load_runs(str(tmp_path)).sort_values("width_check")
    assert list(runs["width_check"]) == ["fingerprint", "rows"]
    same = [c for c in CHOICE_NAMES if c != "width_check"]
    assert (runs[same].nunique(dropna=False) == 1).all()
    assert list(pa.compare(runs, by="width_check", metrics=["voids"])["width_check"]) == [
        "fingerprint",
        "rows",
    ]
    # W&B: the same flat keys in each run's config, the default design untagged
    for arm, run in logged.items():
        assert run.config["width_check"] == arm and run.group == "apart"
        assert all(k in run.config for k in CHOICE_NAMES)
    assert "width_check=rows" in logged["rows"].tags
    assert not any(t.startswith("width_check=") for t in logged["fingerprint"].tags)
