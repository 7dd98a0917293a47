"""`python -m ppx.study NAME [--out DIR] [--dry-run] [--ray ADDRESS] [overrides...]`.

Two halves, testable apart: `run_study` launches the sweep and waits for it; `evaluate`
takes any directory of finished runs, checks the expectations and writes the report. The
exit code is 0 only when every expectation holds and every cell produced a run.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ppx.analysis import load_runs
from ppx.study.catalog import load_study
from ppx.study.expect import Result, check_expectations
from ppx.study.report import (
    add_cell_columns,
    add_label_columns,
    expectations_markdown,
    study_table,
    to_markdown,
    write_plots,
)
from ppx.study.spec import Cell, Study
from ppx.study.sweep import Progress, build_commands, cell_name, cell_of, run_sweep


@dataclass
class Outcome:
    exit_code: int
    results: list[Result]
    table: pd.DataFrame
    missing: list[Cell]
    out: Path


def default_out(study: Study) -> Path:
    return Path("outputs") / "studies" / study.name / time.strftime("%Y%m%d-%H%M%S")


def _link_latest(out: Path) -> None:
    # outputs/studies/<NAME>/latest -> newest run, so docs and notebooks have a fixed path.
    latest = out.parent / "latest"
    try:
        if latest.is_symlink():
            latest.unlink()
        if not latest.exists():
            latest.symlink_to(out.name)
    except OSError:
        pass


def _missing_cells(df: pd.DataFrame, cells: list[Cell]) -> list[Cell]:
    found = {cell_of(o, cells) for o in df["overrides"]} if "overrides" in df else set()
    return [c for i, c in enumerate(cells) if i not in found]


def _printable(table: pd.DataFrame, width: int = 64) -> pd.DataFrame:
    """The table as printed: no run_dir, no column that is empty for every run (no `cycle`
    when nothing wedged, no `reason` when everything served), blanks for missing values
    and long texts cut to `width` characters (table.md keeps them whole)."""
    table = table.drop(columns=["run_dir"])
    out = {}
    for col in table.columns:
        values = table[col]
        if values.dtype == object or isinstance(values.dtype, pd.StringDtype):
            text = values.astype("string").fillna("")
            if text.eq("").all():
                continue
            out[col] = text.map(lambda v: v if len(v) <= width else v[: width - 3] + "...")
        elif not values.isna().all():
            out[col] = values
    return pd.DataFrame(out)


def evaluate(study: Study, runs_dir: Path, out: Path, echo=print, plots: bool = True) -> Outcome:
    """Load the finished runs under `runs_dir`, check expectations, write table.md,
    table.csv, expectations.md and PNG figures into `out`, and print the verdicts."""
    out.mkdir(parents=True, exist_ok=True)
    df = load_runs(runs_dir)
    keys = study.cell_keys
    cells = study.expand()
    df = add_label_columns(df, cells, study.labels)
    df = add_cell_columns(df, keys)
    missing = _missing_cells(df, cells) if cells else []
    label_keys = list(dict.fromkeys(k for lab in study.labels for k in lab))
    results = check_expectations(df, study.expect, label_keys)
    table = study_table(df, keys, sort=not study.explicit)

    table.to_csv(out / "table.csv", index=False)
    (out / "table.md").write_text(f"# {study.name}\n\n{study.question}\n\n" + to_markdown(table))
    (out / "expectations.md").write_text(expectations_markdown(study, results, missing))
    if plots:
        write_plots(df, keys, out)

    echo("")
    with pd.option_context(
        "display.width", 200, "display.max_columns", 30, "display.max_colwidth", 48
    ):
        echo(_printable(table).to_string(index=False) if len(table) else "(no runs)")
    echo("")
    for r in results:
        echo(f"{r.status:>7}  [{r.index}] {r.description}\n         {r.detail}")
    for cell in missing:
        echo(f"MISSING  cell {cell_name(cell)} produced no run")
    met = sum(r.met for r in results)
    ok = met == len(results) and not missing and len(df) > 0
    echo(
        f"\n{study.name}: {met}/{len(results)} expectations met, {len(df)} runs, "
        f"{len(missing)} missing cells -> {'PASS' if ok else 'FAIL'}   (report: {out})"
    )
    return Outcome(0 if ok else 1, results, table, missing, out)


def run_study(
    study: Study,
    out: Path,
    extra: list[str],
    timeout_s: float | None = None,
    poll_s: float = 1.0,
    echo=print,
    ray: str | None = None,
) -> list[int]:
    """The sweep: by the study's Hydra launcher, or with `ray` (an address), each cell a
    task on that Ray cluster (sweep_ray.py; a `local` head gets the launcher's n_jobs CPUs)."""
    runs_dir = (out / "runs").resolve()
    commands = build_commands(study, runs_dir, extra, per_cell=ray is not None)
    cells = study.expand()
    echo(f"study {study.name}: {len(cells)} cells -> {runs_dir}")
    parallel = int(study.launcher.get("n_jobs", 1)) if study.explicit else 1
    progress = Progress(runs_dir, cells, echo=echo, keys=study.cell_keys, labels=study.labels)
    if ray is not None:
        from ppx.study.sweep_ray import run_sweep_ray

        cpus = int(study.launcher.get("n_jobs", 2))
        codes = run_sweep_ray(commands, progress, out / "logs", ray, cpus, timeout_s, poll_s)
    else:
        codes = run_sweep(commands, progress, out / "logs", parallel, timeout_s, poll_s)
    for i, code in enumerate(codes):
        if code != 0:
            log = out / "logs" / f"sweep_{i}.log"
            tail = log.read_text().splitlines()[-15:] if log.exists() else []
            echo(f"sweep command {i} exited {code}; last lines of {log}:")
            echo("\n".join("    " + line for line in tail))
    return codes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m ppx.study",
        description="Run a study (experiments/NAME.yaml) and check its expectations.",
    )
    p.add_argument("name", help="study name (experiments/NAME.yaml) or a path to a yaml")
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for every cell")
    p.add_argument("--out", type=Path, help="output dir (default outputs/studies/NAME/<ts>)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument(
        "--from-runs",
        type=Path,
        metavar="DIR",
        help="skip the sweep; check the finished runs under DIR",
    )
    p.add_argument("--experiments", type=Path, help="directory holding the study files")
    p.add_argument("--timeout", type=float, help="stop the sweep after this many seconds")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run each cell as a task on a Ray cluster (local | auto | [ray://]HOST:PORT)",
    )
    p.add_argument("--poll", type=float, default=1.0, help="progress poll period (s)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    p.add_argument(
        "--every-cell",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set KEY in every cell, over the cell's own value (e.g. model=hash)",
    )
    # Intermixed: overrides may come before or after the options (`NAME pp=3 --out X`).
    return p.parse_intermixed_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        study = load_study(args.name, args.experiments)
        if args.every_cell:
            study = study.forcing(args.every_cell)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.ray is not None:
        from ppx.launch.ray_cluster import address_problem

        if (why := address_problem(args.ray)) is not None:
            print(f"error: --{why}", file=sys.stderr)
            return 2
    out = args.out or default_out(study)
    print(f"question: {study.question}")
    if args.dry_run:
        runs_dir = (out / "runs").resolve()
        for cmd in build_commands(study, runs_dir, args.overrides, per_cell=bool(args.ray)):
            print("$ " + shlex.join(cmd))
        for i, cell in enumerate(study.expand()):
            print(f"  cell {i}: {cell_name(cell)}")
        print(f"  {len(study.expect)} expectations")
        return 0
    if args.from_runs:
        runs_dir = args.from_runs
    else:
        out.mkdir(parents=True, exist_ok=True)
        if args.out is None:
            _link_latest(out)
        try:
            run_study(study, out, args.overrides, args.timeout, args.poll, ray=args.ray)
        except KeyboardInterrupt:
            print("interrupted; checking the runs that finished", file=sys.stderr)
        runs_dir = out / "runs"
    return evaluate(study, runs_dir, out, plots=not args.no_plots).exit_code
