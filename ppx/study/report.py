"""The study's outputs: the side-by-side table, expectations.md and the figures."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from ppx.analysis import (
    load_requests,
    plot_bars,
    plot_latency,
    plot_verdict_grid,
    save_figure,
    with_overrides,
)
from ppx.study.expect import Result
from ppx.study.spec import Cell, Study

TABLE_METRICS = [
    "submitted",
    "served",
    "out_tok_s",
    "ttft_ms_p50",
    "itl_ms_p50",
    "voids",
    "flips",
    "retractions",
    "refusals",
    "stops",
    "oracle_mismatches",
    "cycle",
    "reason",
]


def add_cell_columns(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One column per cell key, named as the override (`engine/guard`), holding what each
    run was asked for — choices alone cannot show non-group overrides."""
    return with_overrides(df, keys)


def add_label_columns(
    df: pd.DataFrame, cells: list[dict[str, str]], labels: list[dict[str, str]]
) -> pd.DataFrame:
    """The cells' labels (names that are not overrides) as columns: each run gets the labels
    of the cell its overrides match."""
    if not labels or df.empty or "overrides" not in df:
        return df
    from ppx.study.sweep import cell_of

    df = df.copy()
    idx = [cell_of(o if isinstance(o, dict) else {}, cells) for o in df["overrides"]]
    for name in dict.fromkeys(k for lab in labels for k in lab):
        df[name] = [labels[i].get(name) if i is not None else None for i in idx]
    return df


def study_table(df: pd.DataFrame, keys: list[str], sort: bool = True) -> pd.DataFrame:
    """One row per run: the cell keys, verdict, headline metrics and run dir, sorted by
    the keys (`sort=False` keeps the runs' own order, i.e. an explicit cell list's)."""
    cols = keys + ["verdict"] + [m for m in TABLE_METRICS if m in df] + ["run_dir"]
    table = df[cols].copy()
    if len(table):
        root = os.path.commonpath([str(p) for p in table["run_dir"]]) if len(table) > 1 else ""
        table["run_dir"] = [
            os.path.relpath(str(p), root) if root else str(p) for p in table["run_dir"]
        ]
        if sort:
            table = table.sort_values(keys or ["run_dir"], kind="stable")
    return table.reset_index(drop=True)


def _cell_text(value: object) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub pipe table without the `tabulate` dependency `DataFrame.to_markdown` needs."""
    header = "| " + " | ".join(str(c) for c in table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    rows = [
        "| " + " | ".join(_cell_text(v) for v in row) + " |"
        for row in table.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows]) + "\n"


def expectations_markdown(study: Study, results: list[Result], missing: list[Cell]) -> str:
    met = sum(r.met for r in results)
    lines = [f"# Study `{study.name}`", "", f"**Question.** {study.question}", ""]
    lines += [
        f"**Result.** {met}/{len(results)} expectations met"
        + (f"; {len(missing)} cells produced no run" if missing else ""),
        "",
    ]
    for r in results:
        lines.append(f"- [{'x' if r.met else ' '}] **{r.status}** — {r.description}  ")
        lines.append(f"  {r.detail}")
        for path in r.failing[:5]:
            lines.append(f"  - post-mortem: `{path}`")
    if missing:
        lines += ["", "## Cells without a run", ""]
        lines += [f"- {' '.join(f'{k}={v}' for k, v in c.items()) or '(base)'}" for c in missing]
    return "\n".join(lines) + "\n"


BAR_METRICS = ("voids", "retractions", "refusals", "flips", "out_tok_s")


def bar_metrics(df: pd.DataFrame, limit: int = 4) -> list[str]:
    """The bar panels worth drawing: the candidates some run has a non-zero value for
    (no flips panel for a study without flips), at most `limit`, throughput always last."""
    nonzero = [
        m
        for m in BAR_METRICS
        if m in df and pd.to_numeric(df[m], errors="coerce").fillna(0).ne(0).any()
    ]
    counts = [m for m in nonzero if m != "out_tok_s"][: limit - 1]
    return counts + ["out_tok_s"] if "out_tok_s" in df else counts[:limit] or ["voids"]


def write_plots(df: pd.DataFrame, keys: list[str], out: Path) -> list[Path]:
    """verdict_grid.png, bars.png and (when requests were logged) latency.png."""
    paths: list[Path] = []
    if df.empty:
        return paths
    by = keys or ["run_id"]
    rows, cols = (by[:-1], by[-1:]) if len(by) > 1 else (by, ["verdict"])
    figs = {"verdict_grid": plot_verdict_grid(df, rows=rows, cols=cols)}
    figs["bars"] = plot_bars(df, by=by, metrics=bar_metrics(df))
    requests = load_requests(df)
    extra = [k for k in by if k not in requests]
    if len(requests) and extra:
        requests = requests.merge(df[["run_dir", *extra]].astype({"run_dir": str}), on="run_dir")
    if len(requests):
        figs["latency"] = plot_latency(requests, by=by)
    for name, fig in figs.items():
        paths.append(save_figure(fig, out, name))
        plt.close(fig)
    return paths
