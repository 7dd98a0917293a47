"""Where the notebook tests get their runs: real ones from the engine (the default) or
synthetic ones (`PPX_ANALYSIS_RUNS=fake`, for working on the analysis side without it).

The real runs are generated once per test session (`conftest.real_session_runs`), one
after the other (side by side, the flip run's 6 s of load were spent mostly waiting for its
ranks to start on the two busy cores, and it did not flip):

* `python -m ppx.study smoke_study --out ROOT/smoke`, the study runner end to end over the
  joblib launcher: one served cell (upstream + rank_local) and one wedged cell
  (flush_before_decision + decision), six requests of four tokens each;
* one flipping run, `flip=every_40_passes workload.duration_s=6`, in ROOT/flips/0.

The smoke study's runs are the compare/post-mortem notebooks' runs; the flip run is the
flip notebook's. `generate_runs` is the only function that knows real from fake, so the
notebook tests are the same for both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fake_runs import write_run, write_sweep

REPO = Path(__file__).resolve().parents[2]
RUN_SOURCE = os.environ.get("PPX_ANALYSIS_RUNS", "real")

SMOKE_STUDY = "smoke_study"
# Small enough for a few seconds of wall time on 2 cores, long enough for a flip or two.
FLIP_RUN = [
    "pp=2",
    "logger=none",
    "watch.stall_s=3",
    "workload=shared_prefix",
    "workload.num_requests=6",
    "workload.max_new=4",
    "workload.concurrency=2",
    "flip=every_40_passes",
    "workload.duration_s=6",
]


@dataclass
class Proc:
    """A finished subprocess: its command, exit code, combined output and wall time."""

    cmd: list[str]
    returncode: int
    output: str
    wall_s: float

    def describe(self) -> str:
        tail = "\n".join(self.output.splitlines()[-40:])
        return f"$ {' '.join(self.cmd)}\nexit {self.returncode} after {self.wall_s:.1f}s\n{tail}"


@dataclass
class GeneratedRuns:
    runs_root: Path  # several policies, at least one run not served
    flip_root: Path  # at least one run with flips
    n_runs: int
    has_flips: bool = True
    source: str = "fake"
    procs: dict[str, Proc] = field(default_factory=dict)  # real: "study", "flip"
    study_out: Path | None = None  # real: the smoke study's report dir


def _start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # so a timeout can stop the rank processes too
    )


def _finish(proc: subprocess.Popen, cmd: list[str], t0: float, deadline: float) -> Proc:
    try:
        out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += "\n[killed by the test: timeout]"
    return Proc(cmd, proc.returncode, out, time.monotonic() - t0)


def real_runs(root: Path, timeout_s: float = 240.0) -> GeneratedRuns:
    """Run the smoke study, then the flip run."""
    study_out = root / "smoke"
    study_cmd = [sys.executable, "-m", "ppx.study", SMOKE_STUDY, "--out", str(study_out)]
    study_cmd += ["--poll", "0.5", "--timeout", str(int(timeout_s - 20))]
    flip_dir = root / "flips" / "0"
    flip_cmd = [sys.executable, "-m", "ppx.run", *FLIP_RUN, f"hydra.run.dir={flip_dir}"]
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    procs = {"study": _finish(_start(study_cmd), study_cmd, t0, deadline)}
    t1 = time.monotonic()
    procs["flip"] = _finish(_start(flip_cmd), flip_cmd, t1, deadline)
    runs_root = study_out / "runs"
    n = len(list(runs_root.glob("*/summary.json")))
    flipped = (flip_dir / "summary.json").exists()
    return GeneratedRuns(
        runs_root,
        root / "flips",
        n,
        has_flips=flipped,
        source="real",
        procs=procs,
        study_out=study_out,
    )


def fake_runs(root: Path) -> GeneratedRuns:
    sweep = {
        "engine/admission": ["rank_local", "decision"],
        "engine/ordering": ["decision_first", "flush_before_decision"],
    }
    dirs = write_sweep(root / "runs", sweep, base=["+exp=smoke", "pp=2"])
    for i, flip in enumerate(["off", "every_2s", "every_40_passes"]):
        write_run(root / "flips" / str(i), ["+exp=smoke", f"flip={flip}"])
    return GeneratedRuns(root / "runs", root / "flips", len(dirs))


def generate_runs(root: Path, source: str = RUN_SOURCE) -> GeneratedRuns:
    if source == "real":
        return real_runs(root)
    if source == "fake":
        return fake_runs(root)
    raise ValueError(f"PPX_ANALYSIS_RUNS must be real or fake, not {source!r}")
