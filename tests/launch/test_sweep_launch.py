"""Sweeps that really launch: a two-cell Hydra multirun of the real engine through the
submitit plugin's local executor (real submitit jobs, each its own process on this machine).

The compose tests (tests/analysis/test_launcher_configs.py) only prove the YAML names a class;
this proves a sweep submitted through it runs every cell to a verdict and leaves no process
behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ppx_helpers import ROOT, pids_alive

CELLS = ["seed=1,2"]  # two cells; pp=1 keeps each cell one rank process on the small machine
BASE = ["logger=none", "+exp=micro_load", "engine.transport=gloo", "pp=1"]


def sweep(sweep_dir: Path, launcher: str, env: dict | None = None, timeout: float = 600):
    args = [
        sys.executable,
        "-m",
        "ppx.run",
        "-m",
        f"hydra/launcher={launcher}",
        f"hydra.sweep.dir={sweep_dir}",
        *BASE,
        *CELLS,
    ]
    e = dict(os.environ, WANDB_MODE="offline", **(env or {}))
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=e)


def cell_summaries(sweep_dir: Path) -> dict[str, dict]:
    out = {}
    for job in sorted(p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()):
        s = job / "summary.json"
        out[job.name] = json.loads(s.read_text()) if s.exists() else None
        assert pids_alive(str(job)) == [], f"cell {job.name}: a rank outlived its run"
    return out


def test_submitit_local_sweep_runs_every_cell(tmp_path: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    d = tmp_path / "sweep"
    proc = sweep(d, "submitit_local")
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = cell_summaries(d)
    assert sorted(cells) == ["0", "1"], cells
    for name, s in cells.items():
        assert s is not None, f"cell {name} wrote no summary.json"
        assert s["verdict"] == "served" and s["served"] == s["submitted"] > 0, (name, s)
    # submitit really ran them: one job folder per cell with the job's own log and result
    # (submitit also keeps its un-substituted `%j` template folder there)
    jobs = [p for p in (d / ".submitit").iterdir() if p.is_dir() and p.name.isdigit()]
    assert len(jobs) == 2, jobs
    for j in jobs:
        assert list(j.glob("*_result.pkl")), f"submitit job {j.name} left no result"
        assert list(j.glob("*_log.out")), f"submitit job {j.name} left no log"
    # the two cells are the two seeds
    overrides = sorted((d / n / ".hydra" / "overrides.yaml").read_text() for n in cells)
    assert "seed=1" in overrides[0] and "seed=2" in overrides[1], overrides
