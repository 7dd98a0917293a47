"""What ppx really logs to W&B, read back with W&B's own reader.

One real offline run (gloo, pp=2, the micro model, non-default policies) is logged by the
sink; its `.wandb` transaction log is decoded by `wandb leet inspect --json` (the W&B CLI's
reader of the offline log, no network), and the choices, counters and series found there
must be the run's summary.json and metrics.parquet. `load_wandb` is then fed that very run
(through a stand-in `wandb.Api`, the only part that needs a network) and must give the
row `load_runs` gives for the same run directory.
"""

from __future__ import annotations

import glob
import math
import os
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

import ppx.analysis as pa
from ppx.analysis.schema import RUN_COLUMNS
from ppx.run import WANDB_WARNING
from ppx.telemetry.summary import CHOICE_KEYS, GROUP_COUNTERS

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
from ppx_helpers import run_ppx  # noqa: E402
from wandb_log import read_log  # noqa: E402

RUN = [
    "+exp=micro_load",
    "engine.transport=gloo",
    "pp=2",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "engine/guard=rid",
]
# the counter names of DESIGN section 5, as W&B keys
DESIGN_NAMES = (
    "flips voids retractions refusals stops out_tok_s prefill_tok_s submitted served lost "
    "oracle_mismatches ledger_violations verdict"
).split()


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("wandb") / "run")
    proc, summary = run_ppx(run_dir, *RUN, logger="wandb")
    assert summary is not None and summary["verdict"] == "served", proc.stdout + proc.stderr
    files = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "*.wandb"))
    assert len(files) == 1, files
    return proc, summary, run_dir, read_log(files[0])


def test_a_logged_run_prints_no_logging_warning(logged):
    proc, *_ = logged
    assert WANDB_WARNING.strip() not in proc.stderr


def test_the_choices_are_flat_config_keys(logged):
    _, summary, _, run = logged
    assert set(summary["choices"]) == set(CHOICE_KEYS)
    assert {k: run.config.get(k) for k in CHOICE_KEYS} == summary["choices"]
    assert (run.config["admission"], run.config["ordering"], run.config["guard"]) == (
        "decision",
        "decision_first",
        "rid",
    )
    assert run.config["resolved"]["engine"]["admission"]["name"] == "decision"
    assert run.group == "micro_load" and "guard=rid" in run.tags


def test_the_counters_are_the_summary_under_their_own_names(logged):
    _, summary, _, run = logged
    scalars = {k: v for k, v in summary.items() if v is None or isinstance(v, (int, float, str))}
    for k, v in scalars.items():
        got = run.summary.get(k, "absent")
        assert got == v or (isinstance(v, float) and math.isclose(got, v)), (k, got, v)
    assert set(DESIGN_NAMES + GROUP_COUNTERS) <= set(run.summary)
    for k, per in summary["per_rank"].items():
        assert [run.summary[f"rank{r}/{k}"] for r in range(len(per))] == per


def test_the_series_are_the_group_metrics(logged):
    _, _, run_dir, run = logged
    df = pd.read_parquet(os.path.join(run_dir, "metrics.parquet"))
    cols = set(df.columns) - {"rank", "phase", "epoch"}
    assert run.series == {f"group/{c}" for c in cols} | {"events"}


def test_load_wandb_gives_the_local_row_for_the_logged_run(logged, monkeypatch):
    _, _, run_dir, run = logged
    api = types.ModuleType("wandb")
    calls = []

    class Api:
        def runs(self, path, filters=None):
            calls.append((path, filters))
            return [run]

    api.Api = Api
    monkeypatch.setitem(sys.modules, "wandb", api)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    remote = pa.load_wandb("me/ppx", {"group": "micro_load"})
    local = pa.load_runs(run_dir)
    assert calls == [("me/ppx", {"group": "micro_load"})]
    n = len(RUN_COLUMNS)
    assert list(remote.columns[:n]) == list(local.columns[:n]) == list(RUN_COLUMNS)
    assert set(local.columns) - {"overrides"} <= set(remote.columns)
    # the run dir is the local store's; W&B names the study by the run's group
    same = [c for c in local.columns if c not in ("run_dir", "overrides", "study")]
    assert remote.loc[0, "study"] == "micro_load"
    pd.testing.assert_frame_equal(remote[same], local[same], check_dtype=True)
    assert remote.loc[0, "wandb_path"] == f"offline/ppx/{run.id}"
    table = pa.compare(remote, by="guard", metrics=["voids"])
    assert list(table["guard"]) == ["rid"]


def test_a_logging_failure_is_one_warning_line(tmp_path, monkeypatch, capsys):
    import wandb
    from ppx_helpers import compose

    from ppx.run import execute

    def refuse(**kw):
        raise OSError("disk full")

    monkeypatch.setattr(wandb, "init", refuse)
    cfg = compose("+exp=micro_load", "pp=2", "logger=wandb")
    s = execute(cfg, str(tmp_path), "micro_load")
    err = capsys.readouterr().err
    assert s["verdict"] == "served"  # the store is written; the run is not failed by W&B
    assert f"{WANDB_WARNING}OSError: disk full" in err.splitlines()


def test_load_wandb_offline_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    with pytest.raises(RuntimeError, match="wandb sync"):
        pa.load_wandb("me/ppx", None)
    monkeypatch.delenv("WANDB_MODE")
    broken = types.ModuleType("wandb")

    def api():
        raise ConnectionError("no route to api.wandb.ai")

    broken.Api = api
    monkeypatch.setitem(sys.modules, "wandb", broken)
    with pytest.raises(RuntimeError, match="not reachable.*ConnectionError"):
        pa.load_wandb("me/ppx", None)
