"""Launching a study's multirun and reporting progress while it runs.

The engine is driven only through its CLI (`python -m ppx.run -m ...`) in a subprocess, so
the study runner never imports engine code and a crashing run cannot take the runner down.
Progress is read from the sweep directory itself: a job dir with `.hydra/overrides.yaml`
has started, one with `summary.json` has finished.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppx.analysis.load import read_overrides
from ppx.study.spec import Cell, Study, fmt_value, norm_key

RUN_CMD_ENV = "PPX_STUDY_RUN_CMD"  # e.g. "python -m ppx.run" (tests point it at a fake)


def run_command(runner: str = "run") -> list[str]:
    if os.environ.get(RUN_CMD_ENV):
        return shlex.split(os.environ[RUN_CMD_ENV])
    return [sys.executable, "-m", f"ppx.{runner}"]


def _flatten(prefix: str, value: Any) -> list[str]:
    if isinstance(value, dict):
        return [o for k, v in value.items() for o in _flatten(f"{prefix}.{k}", v)]
    if isinstance(value, list):
        return [f"{prefix}=[{','.join(fmt_value(v) for v in value)}]"]
    return [f"{prefix}={fmt_value(value)}"]


def launcher_overrides(launcher: dict[str, Any]) -> list[str]:
    out = [f"hydra/launcher={launcher.get('name', 'joblib')}"]
    for key, value in launcher.items():
        if key != "name":
            out += _flatten(f"hydra.launcher.{key}", value)
    return out


def raw_cells(study: Study) -> list[Cell]:
    """Every cell with its YAML values (expand() gives them as recorded text), in the
    order Hydra's basic sweeper numbers jobs."""
    if study.explicit:
        return [dict(c) for c in study.cells]
    keys = list(study.sweep)
    return [dict(zip(keys, combo)) for combo in itertools.product(*study.sweep.values())]


def build_commands(
    study: Study, runs_dir: Path, extra: list[str], per_cell: bool = False
) -> list[list[str]]:
    """The multirun command lines: one for a cartesian sweep (Hydra expands it), one per
    cell for an explicit cell list (Hydra's basic sweeper only does products) or when asked
    (`per_cell`: each cell a job of its own, run by Hydra's basic launcher, as the Ray sweep
    places them), each cell pinned to its own sub-directory so job numbers cannot collide."""
    launcher = {"name": "basic"} if per_cell else study.launcher
    head = run_command(study.runner) + ["-m", *launcher_overrides(launcher)]
    head.append(f"hydra.sweep.dir={runs_dir}")
    common = list(study.base) + list(extra)
    if study.group:
        # `++` so the group is set even when the chosen logger config has no `group` key.
        common.append(f"++logger.group={fmt_value(study.group)}")
    if not (study.explicit or per_cell):
        sweep = [f"{k}={','.join(fmt_value(v) for v in vs)}" for k, vs in study.sweep.items()]
        return [head + common + sweep]
    return [
        head + [f"hydra.sweep.subdir={i}"] + common + [f"{k}={fmt_value(v)}" for k, v in c.items()]
        for i, c in enumerate(raw_cells(study))
    ]


def _same(recorded: str, asked: str) -> bool:
    """A recorded override against the cell's value: Hydra's multirun writes booleans back
    as `True`/`False` and lists as `[2, 300]`."""
    a, b = recorded.strip("'\""), asked
    if a.lower() in ("true", "false"):
        a = a.lower()
    return a == b or a.replace(" ", "") == b.replace(" ", "")


def cell_of(overrides: dict[str, str], cells: list[Cell]) -> int | None:
    """The cell a run's overrides belong to: the most specific cell they satisfy, so a red
    cell and its green twin with one more override (`engine.readiness=true`) stay apart."""
    hits = [
        (len(cell), -i)
        for i, cell in enumerate(cells)
        if all(_same(overrides.get(norm_key(k), ""), v) for k, v in cell.items())
    ]
    return -max(hits)[1] if hits else None


def cell_name(cell: Cell, keys: list[str] | None = None) -> str:
    """`k=v ...` for a cell; with `keys`, only those (the study's columns), so progress
    lines stay short when cells share long family overrides."""
    items = [(k, cell[k]) for k in keys if k in cell] if keys else list(cell.items())
    return " ".join(f"{k}={v}" for k, v in items) or "(base)"


@dataclass
class JobState:
    status: str  # running | done | failed
    cell: int | None
    verdict: str | None = None


@dataclass
class Progress:
    """Scans the sweep dir and prints one compact line per job state change."""

    runs_dir: Path
    cells: list[Cell]
    echo: Callable[[str], None] = print
    keys: list[str] | None = None  # the cell keys shown per job (default: all)
    labels: list[dict[str, str]] = field(default_factory=list)  # per cell, shown with keys
    jobs: dict[str, JobState] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def scan(self, final: bool = False) -> None:
        if not self.runs_dir.is_dir():
            return
        for job in sorted(p for p in self.runs_dir.iterdir() if p.is_dir()):
            if not (job / ".hydra" / "overrides.yaml").exists():
                continue
            state = self._state(job, final)
            old = self.jobs.get(job.name)
            if old is None or old.status != state.status:
                self.jobs[job.name] = state
                self._report(job.name, state)

    def _state(self, job: Path, final: bool) -> JobState:
        cell = cell_of(read_overrides(job), self.cells)
        summary = job / "summary.json"
        if summary.exists():
            try:
                verdict = json.loads(summary.read_text()).get("verdict")
            except (OSError, json.JSONDecodeError):
                return JobState("running", cell)  # mid-write; next scan gets it
            return JobState("done", cell, verdict)
        return JobState("failed" if final else "running", cell)

    def counts(self) -> dict[str, int]:
        out = {"done": 0, "running": 0, "failed": 0}
        for s in self.jobs.values():
            out[s.status] += 1
        return out

    def _report(self, job: str, state: JobState) -> None:
        c = self.counts()
        if state.cell is not None:
            label = self.labels[state.cell] if self.labels else {}
            where = cell_name({**self.cells[state.cell], **label}, self.keys)
        else:
            where = f"job {job}"
        what = state.status + (f" ({state.verdict})" if state.verdict else "")
        self.echo(
            f"[{time.monotonic() - self.started:6.1f}s {c['done']}/{len(self.cells)} done, "
            f"{c['running']} running, {c['failed']} failed] job {job}: {where} -> {what}"
        )

    def missing(self) -> list[Cell]:
        """Cells that never produced a finished run."""
        done = {s.cell for s in self.jobs.values() if s.status == "done"}
        return [c for i, c in enumerate(self.cells) if i not in done]


def start_logged(cmd: list[str], log_path: Path) -> subprocess.Popen:
    """One sweep command in its own session (so `stop` reaches its launcher's workers),
    its output in `log_path` after the command line."""
    with open(log_path, "w") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        log.flush()
        return subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip


def stop(proc: subprocess.Popen) -> None:
    # The run command was started in its own session: signal that group only, which also
    # reaches the launcher's worker processes.
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_sweep(
    commands: list[list[str]],
    progress: Progress,
    log_dir: Path,
    parallel: int = 1,
    timeout_s: float | None = None,
    poll_s: float = 1.0,
) -> list[int]:
    """Run the command lines (at most `parallel` at once), polling progress; returns each
    command's exit code (-9 for ones stopped by the timeout)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    pending = list(enumerate(commands))
    live: dict[int, subprocess.Popen] = {}
    codes: dict[int, int] = {}
    deadline = time.monotonic() + timeout_s if timeout_s else None
    try:
        while pending or live:
            while pending and len(live) < max(1, parallel):
                i, cmd = pending.pop(0)
                live[i] = start_logged(cmd, log_dir / f"sweep_{i}.log")
            time.sleep(poll_s)
            progress.scan()
            for i, proc in list(live.items()):
                if proc.poll() is not None:
                    codes[i] = proc.returncode
                    del live[i]
            if deadline and time.monotonic() > deadline:
                progress.echo(f"timeout after {timeout_s:.0f}s: stopping the sweep")
                for i, proc in live.items():
                    stop(proc)
                    codes[i] = -9
                live.clear()
                codes.update({i: -9 for i, _ in pending})
                pending.clear()
    except KeyboardInterrupt:
        for proc in live.values():
            stop(proc)
        raise
    progress.scan(final=True)
    return [codes[i] for i in range(len(commands))]
