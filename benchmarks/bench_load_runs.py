"""How long `ppx.analysis.load_runs` takes on a 200-run sweep (target: < 5 s).

    python benchmarks/bench_load_runs.py [--runs 200] [--light] [--keep DIR]
    python benchmarks/bench_load_runs.py --from outputs/studies/admission_matrix/latest/runs

Writes synthetic run dirs (the test fixture writer, full schema: summary, Hydra files,
parquet tables, post-mortems for the wedged half) into a temp dir laid out like a Hydra
multirun, then times a cold `load_runs` and, for scale, `load_series` over every run.
`--from DIR` times the same loaders (plus `load_requests`) on run dirs the engine wrote,
e.g. a study's `runs/`, instead of generating any.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "analysis")]

from fake_runs import write_run  # noqa: E402

import ppx.analysis as pa  # noqa: E402

GRID = {
    "engine/admission": ["rank_local", "decision"],
    "engine/ordering": ["decision_first", "flush_before_decision"],
    "engine/guard": ["off", "rid", "prefix"],
    "flip": ["off", "every_1s"],
    "pp": [2, 3],
}


def generate(root: Path, n: int, tables: bool) -> None:
    cells = itertools.cycle(itertools.product(*GRID.values()))
    for num in range(n):
        values = next(cells)
        overrides = ["+exp=smoke", f"seed={num}"] + [f"{k}={v}" for k, v in zip(GRID, values)]
        write_run(root / str(num), overrides, study="bench", tables=tables)


def bench_existing(root: Path) -> int:
    """Time the loaders on run dirs that already exist (real engine output)."""
    t0 = time.perf_counter()
    df = pa.load_runs(root)
    load_s = time.perf_counter() - t0
    if df.empty:
        print(f"no runs under {root}")
        return 1
    timings = {}
    for name, fn in (("load_series", pa.load_series), ("load_requests", pa.load_requests)):
        t0 = time.perf_counter()
        rows = len(fn(df))
        timings[name] = (rows, time.perf_counter() - t0)
    verdicts = df["verdict"].astype(str).value_counts().to_dict()
    print(f"load_runs: {len(df)} runs under {root} in {load_s:.3f} s  verdicts {verdicts}")
    for name, (rows, secs) in timings.items():
        print(f"{name}: {rows:,} rows in {secs:.3f} s")
    return 0 if load_s < 5 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--light", action="store_true", help="summaries only, no parquet tables")
    ap.add_argument("--keep", type=Path, help="write the runs here instead of a temp dir")
    ap.add_argument("--from", dest="source", type=Path, help="time real run dirs under DIR")
    args = ap.parse_args()
    if args.source:
        return bench_existing(args.source)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp) / "runs"
        t0 = time.perf_counter()
        generate(root, args.runs, tables=not args.light)
        gen_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        df = pa.load_runs(root)
        load_s = time.perf_counter() - t0
        assert len(df) == args.runs, (len(df), args.runs)

        series_s = float("nan")
        if not args.light:
            t0 = time.perf_counter()
            series = pa.load_series(df)
            series_s = time.perf_counter() - t0
        print(f"generated {args.runs} run dirs in {gen_s:.2f} s")
        print(
            f"load_runs: {len(df)} runs in {load_s:.3f} s ({len(df) / load_s:,.0f} rows/s)"
            f" -> {'OK' if load_s < 5 else 'SLOW'} (target < 5 s)"
        )
        if not args.light:
            print(
                f"load_series: {len(series):,} rows from {len(df)} runs in {series_s:.3f} s "
                f"({len(series) / series_s:,.0f} rows/s)"
            )
    return 0 if load_s < 5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
