"""W&B as systems researchers filter it: job_type per kind of run (run, replay, study,
explore), group per study, the explorer's runs with verdict counts, schedules/s and a
failures table with replay commands, the post-mortem page as an artifact; read back from
the offline run's transaction log with `wandb leet inspect --json`."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

from ppx_helpers import ROOT

WEDGE = ["engine.transport=sim", "pp=3", "engine/admission=decision",
         "engine/ordering=flush_before_decision"]  # fmt: skip


def leet(run_dir: str) -> list[dict]:
    """Every record of the run's .wandb log, as W&B's own reader prints it."""
    path = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*"))
    assert len(path) == 1, path
    out = subprocess.run(
        ["wandb", "leet", "inspect", "--json", path[0]], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def _run(recs: list[dict]) -> dict:
    return next(r["run"] for r in recs if r["type"] == "run")


def _artifacts(recs: list[dict]) -> dict[str, list[str]]:
    return {
        r["artifact"]["type"]: [c["path"] for c in r["artifact"]["manifest"]["contents"]]
        for r in recs
        if r["type"] == "artifact"
    }


def _logged(run_dir: str, *over: str) -> tuple[dict, list[dict]]:
    from ppx_helpers import compose

    from ppx.run import execute

    os.environ["WANDB_MODE"] = "offline"
    os.makedirs(run_dir, exist_ok=True)
    s = execute(compose("logger=wandb", *over), run_dir, None, list(over))
    return s, leet(run_dir)


def test_a_wedged_run_carries_its_postmortem_page_and_a_replay_is_a_replay(tmp_path):
    s, recs = _logged(str(tmp_path / "wedge"), *WEDGE)
    assert s["verdict"] == "wedged"
    assert (_run(recs)["job_type"], _run(recs)["run_group"]) == ("run", "adhoc")
    files = _artifacts(recs)["postmortem"]
    assert "postmortem.html" in files and "flight_recorder/ppx_fr_1" in files
    _, again = _logged(str(tmp_path / "replay"), *WEDGE, f"explore.replay={s['schedule']}")
    assert _run(again)["job_type"] == "replay"


def test_a_study_run_is_grouped_by_its_study_and_a_served_run_has_no_page(tmp_path):
    s, recs = _logged(str(tmp_path / "study"), "engine.transport=sim", "pp=2",
                      "workload.num_requests=4", "logger.group=ordering_matrix")  # fmt: skip
    assert s["verdict"] == "served"
    assert (_run(recs)["job_type"], _run(recs)["run_group"]) == ("study", "ordering_matrix")
    assert "postmortem" not in _artifacts(recs)  # red arm: nothing died, nothing attached


def test_the_explorer_logs_its_verdicts_and_failures(tmp_path):
    out = str(tmp_path / "ex")
    args = [sys.executable, "-m", "ppx.explore", f"hydra.run.dir={out}", "pp=3",
            "engine/admission=decision", "engine/ordering=flush_before_decision",
            "explore.schedules=2", "logger=wandb"]  # fmt: skip
    env = dict(os.environ, WANDB_MODE="offline")
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    assert "W&B logging failed" not in proc.stderr
    recs = leet(out)
    assert _run(recs)["job_type"] == "explore"
    summary = {}
    for r in recs:
        if r["type"] == "summary":
            summary |= r["summary"]["update"]
    s = json.load(open(os.path.join(out, "summary.json")))
    assert summary["verdicts/wedged"] == s["verdicts"]["wedged"] == 2
    assert summary["schedules_per_s"] == s["schedules_per_s"]
    table = glob.glob(os.path.join(out, "wandb", "offline-run-*", "files", "media", "table", "failures_*.json"))  # fmt: skip
    rows = json.load(open(table[0]))
    assert rows["columns"] == ["failure", "verdict", "schedule", "strategy", "replay"]
    assert rows["data"] and all("explore.replay=" in row[4] for row in rows["data"])
