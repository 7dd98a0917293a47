"""The study loop end to end on the real engine: `python -m ppx.study smoke_study`.

The study (experiments/smoke_study.yaml: one served and one wedged cell) runs once per
session in `conftest.real_session_runs`, through the joblib launcher with two jobs at a
time, so this also checks that rank processes can be spawned from joblib's loky workers.
"""

from __future__ import annotations

import pandas as pd
from run_source import GeneratedRuns

import ppx.analysis as pa


def test_smoke_study_end_to_end(real_session_runs: GeneratedRuns) -> None:
    proc = real_session_runs.procs["study"]
    assert proc.returncode == 0, proc.describe()
    assert "smoke_study: 2/2 expectations met, 2 runs, 0 missing cells -> PASS" in proc.output
    assert "2/2 done" in proc.output and "-> done (wedged)" in proc.output
    out = real_session_runs.study_out
    for name in ("table.md", "table.csv", "expectations.md", "verdict_grid.png", "bars.png"):
        assert (out / name).stat().st_size > 0, name
    report = (out / "expectations.md").read_text()
    assert "2/2 expectations met" in report and report.count("**MET**") == 2
    table = pd.read_csv(out / "table.csv")
    verdicts = dict(zip(table["engine/ordering"], table["verdict"]))
    assert verdicts == {"upstream": "served", "flush_before_decision": "wedged"}
    # Both cells went through joblib's loky workers, which spawned the rank processes.
    for i in range(2):
        log = (out / "logs" / f"sweep_{i}.log").read_text()
        assert "hydra/launcher=joblib" in log and "backend=loky" in log, log[-2000:]
    wedged = table.loc[table["verdict"] == "wedged", "run_dir"].iloc[0]
    pm = pa.load_postmortem(out / "runs" / str(wedged))
    assert pa.cycle_ranks(pm.cycle) == [0, 1] and {"chain", "decision"} <= pa.cycle_words(pm.cycle)


def test_flip_run_served_with_flips(real_session_runs: GeneratedRuns) -> None:
    proc = real_session_runs.procs["flip"]
    assert proc.returncode == 0, proc.describe()  # a single run exits 0 only when served
    runs = pa.load_runs(real_session_runs.flip_root)
    assert len(runs) == 1 and runs.loc[0, "verdict"] == "served"
    assert runs.loc[0, "flips"] >= 1 and runs.loc[0, "oracle_mismatches"] == 0
