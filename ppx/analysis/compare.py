"""Group-by comparison of runs into a tidy table.

`compare` is deliberately long-format (one row per group x metric): it plots directly with
`plot_bars`, filters with ordinary pandas, and pivots into the wide table a paper wants with
`wide()`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ppx.analysis.schema import METRIC_COLUMNS, VERDICTS


def _as_list(x: str | Sequence[str] | None) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def compare(
    df: pd.DataFrame,
    by: str | Sequence[str],
    metrics: str | Sequence[str] | None = None,
) -> pd.DataFrame:
    """Summarise `metrics` per group of `by` columns.

    Returns columns: the `by` columns, `metric`, `mean`, `min`, `max`, `count` (runs with a
    value for that metric), `runs` (runs in the group) and `n_<verdict>` for every verdict
    seen in `df`, so a group that wedged half the time cannot hide behind a good mean.
    """
    by = _as_list(by)
    metrics = _as_list(metrics) or [m for m in METRIC_COLUMNS if m in df]
    missing = [c for c in by + metrics if c not in df]
    if missing:
        raise KeyError(f"compare: columns not in frame: {missing}")
    work = df[by + metrics + ["verdict"]].copy()
    for col in by:
        # Missing choices (e.g. an engine that does not log `faults`) still form a group.
        if work[col].isna().any():
            work[col] = work[col].astype(object).where(work[col].notna(), "<na>")
    for m in metrics:
        work[m] = pd.to_numeric(work[m], errors="coerce").astype("float64")

    grouped = work.groupby(by, dropna=False, observed=True, sort=True)
    long = (
        grouped[metrics]
        .agg(["mean", "min", "max", "count"])
        .stack(level=0, future_stack=True)
        .rename_axis([*by, "metric"])
        .reset_index()
    )
    verdict_names = [v for v in _ordered_verdicts(work["verdict"]) if v]
    counts = (
        work.assign(verdict=work["verdict"].astype(object))
        .pivot_table(index=by, columns="verdict", aggfunc="size", fill_value=0)
        .reindex(columns=verdict_names, fill_value=0)
    )
    counts.columns = [f"n_{v}" for v in counts.columns]
    counts.insert(0, "runs", counts.sum(axis=1))
    out = long.merge(counts.reset_index(), on=by, how="left")
    order = {m: i for i, m in enumerate(metrics)}
    out = out.sort_values([*by, "metric"], key=lambda s: s.map(order) if s.name == "metric" else s)
    for col in ["count", "runs"] + [f"n_{v}" for v in verdict_names]:
        out[col] = out[col].fillna(0).astype("int64")
    return out.reset_index(drop=True)


def _ordered_verdicts(verdicts: pd.Series) -> list[str]:
    seen = {str(v) for v in verdicts.dropna().unique()}
    return [v for v in VERDICTS if v in seen] + sorted(seen - set(VERDICTS))


def wide(table: pd.DataFrame, stat: str = "mean") -> pd.DataFrame:
    """Pivot a `compare` table to one row per group and one column per metric."""
    by = [c for c in table.columns if c not in _STAT_COLS and not c.startswith("n_")]
    by = [c for c in by if c != "runs"]
    out = table.pivot_table(index=by, columns="metric", values=stat, sort=False)
    out.columns.name = None
    return out.reset_index()


_STAT_COLS = ("metric", "mean", "min", "max", "count")


def verdict_counts(df: pd.DataFrame, by: str | Sequence[str]) -> pd.DataFrame:
    """Runs per group and verdict, wide (one column per verdict seen)."""
    by = _as_list(by)
    verdicts = _ordered_verdicts(df["verdict"])
    out = (
        df.assign(verdict=df["verdict"].astype(object))
        .pivot_table(index=by, columns="verdict", aggfunc="size", fill_value=0, observed=True)
        .reindex(columns=verdicts, fill_value=0)
    )
    out.columns.name = None
    return out.reset_index()
