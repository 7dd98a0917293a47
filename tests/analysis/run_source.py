"""Where the notebook tests get their runs: synthetic ("fake") or `python -m ppx.run`
("real"). One switch, `PPX_ANALYSIS_RUNS=fake|real`; `generate_runs` is the only function
that knows the difference, so the tests themselves are the same for both.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fake_runs import write_run, write_sweep

REPO = Path(__file__).resolve().parents[2]
RUN_SOURCE = os.environ.get("PPX_ANALYSIS_RUNS", "fake")


@dataclass
class GeneratedRuns:
    runs_root: Path  # several policies, at least one run not served
    flip_root: Path  # runs with flips (fake) or whatever flip configs exist (real)
    n_runs: int
    has_flips: bool = True


def generate_runs(root: Path, source: str = RUN_SOURCE) -> GeneratedRuns:
    if source == "real":
        return _real_runs(root)
    if source != "fake":
        raise ValueError(f"PPX_ANALYSIS_RUNS must be fake or real, not {source!r}")
    sweep = {
        "engine/admission": ["rank_local", "decision"],
        "engine/ordering": ["decision_first", "flush_before_decision"],
    }
    dirs = write_sweep(root / "runs", sweep, base=["+exp=smoke", "pp=2"])
    for i, flip in enumerate(["off", "every_1s", "every_2s"]):
        write_run(root / "flips" / str(i), ["+exp=smoke", f"flip={flip}"])
    return GeneratedRuns(root / "runs", root / "flips", len(dirs))


# Small enough that a run takes seconds on 2 cores; the stall watchdog still fires.
TINY = ["+exp=smoke", "pp=2", "workload.num_requests=8", "workload.max_new=4"]
WEDGE = "engine/ordering=flush_before_decision"


def _configs(group: str) -> list[str]:
    return sorted(p.stem for p in (REPO / "conf" / group).glob("*.yaml"))


# Hydra's basic (sequential) launcher by default; PPX_ANALYSIS_LAUNCHER=joblib runs the
# cells two at a time once rank processes can be spawned from joblib's loky workers.
LAUNCHER = os.environ.get("PPX_ANALYSIS_LAUNCHER", "basic")


def _multirun(sweep_dir: Path, overrides: list[str], timeout: float = 300) -> None:
    launcher = [] if LAUNCHER == "basic" else [f"hydra/launcher={LAUNCHER}"]
    cmd = [sys.executable, "-m", "ppx.run", "-m", *launcher, f"hydra.sweep.dir={sweep_dir}"]
    cmd += [*TINY, *overrides]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    # A wedged run is a finished run with a verdict; only a missing summary is an error.
    if not list(sweep_dir.glob("*/summary.json")):
        raise RuntimeError(f"{' '.join(cmd)} produced no run:\n{proc.stdout}\n{proc.stderr}")


def _real_runs(root: Path) -> GeneratedRuns:
    """Tiny real runs: up to two admission policies plus one ordering that wedges the
    ring, and (when a flip config exists) a flipping run next to a non-flipping one."""
    wedge_cfg = REPO / "conf" / "engine" / "ordering" / "flush_before_decision.yaml"
    if not wedge_cfg.exists():
        raise RuntimeError(f"real notebook runs need {wedge_cfg} for the wedged run")
    # rank_local (the default, served under the default ordering) plus one other policy.
    others = [p for p in _configs("engine/admission") if p != "rank_local"]
    policies = ["rank_local", *others[:1]]
    _multirun(root / "runs", [f"engine/admission={','.join(policies)}"])
    _multirun(root / "runs_wedged", [WEDGE])
    # Fold the wedged job into the policy sweep dir so one root holds both kinds.
    (root / "runs_wedged" / "0").rename(root / "runs" / "wedged")
    flips = [f for f in _configs("flip") if f != "off"][:1]
    _multirun(root / "flips", ["flip=" + ",".join(["off", *flips])])
    n = len(list((root / "runs").glob("*/summary.json")))
    return GeneratedRuns(root / "runs", root / "flips", n, has_flips=bool(flips))
