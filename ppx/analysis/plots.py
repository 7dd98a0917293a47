"""Cross-run figures: verdict grid, metric bars, latency distributions.

Every helper returns its `Figure` and draws nothing else, so notebooks show it, scripts
save it (`save_figure`) and tests close it; verdict colours come from one table so a
wedged cell is the same red in every figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, NullFormatter

from ppx.analysis.compare import _as_list, _ordered_verdicts, compare
from ppx.analysis.schema import UNKNOWN_COLOR, VERDICT_COLORS


def verdict_color(verdict: object) -> str:
    return VERDICT_COLORS.get(str(verdict), UNKNOWN_COLOR)


def group_label(values: object, keys: Sequence[str]) -> str:
    """ "guard=rid, ordering=decision_first" for a groupby key (scalar or tuple)."""
    vals = values if isinstance(values, tuple) else (values,)
    return ", ".join(f"{k}={v}" for k, v in zip(keys, vals))


def _verdict_legend(ax, verdicts: Sequence[str], **kw) -> None:
    handles = [Patch(facecolor=verdict_color(v), label=v) for v in verdicts]
    if handles:
        ax.legend(handles=handles, title="verdict", **kw)


def _keyed(df: pd.DataFrame, keys: list[str]) -> pd.Series:
    # Missing values become "<na>" so they form their own row/column instead of vanishing.
    parts = [df[k].astype(object).where(df[k].notna(), "<na>").astype(str) for k in keys]
    if not parts:
        return pd.Series([""] * len(df), index=df.index)
    out = parts[0]
    for p in parts[1:]:
        out = out + " / " + p
    return out


def plot_verdict_grid(
    df: pd.DataFrame,
    rows: str | Sequence[str],
    cols: str | Sequence[str],
    value: str | None = None,
) -> Figure:
    """A grid with one cell per (rows x cols) combination, filled by the verdicts of its
    runs as stacked fractions (a cell that wedged 1 run in 3 shows a third red).

    `rows`/`cols` may be several columns (e.g. rows=["admission", "guard"],
    cols="ordering"); `value` optionally prints the mean of a metric in each cell.
    """
    rows, cols = _as_list(rows), _as_list(cols)
    rkey, ckey = _keyed(df, rows), _keyed(df, cols)
    rlabels, clabels = sorted(rkey.unique()), sorted(ckey.unique())
    verdicts = _ordered_verdicts(df["verdict"])
    # Size from the content: long row labels and the legend must not squeeze the cells.
    label_w = 0.075 * max((len(str(r)) for r in rlabels), default=0)
    fig, ax = plt.subplots(
        figsize=(2.6 + label_w + 2.0 * len(clabels), max(2.5, 1.2 + 0.7 * len(rlabels)))
    )
    for i, rl in enumerate(rlabels):
        for j, cl in enumerate(clabels):
            cell = df[(rkey == rl) & (ckey == cl)]
            x0, y0 = j, len(rlabels) - 1 - i
            if cell.empty:
                ax.add_patch(Rectangle((x0, y0), 1, 1, facecolor="white", hatch="//", ec="0.8"))
                continue
            counts = cell["verdict"].astype(str).value_counts()
            left = x0
            for v in verdicts:
                frac = counts.get(v, 0) / len(cell)
                if frac:
                    ax.add_patch(Rectangle((left, y0), frac, 1, facecolor=verdict_color(v)))
                    left += frac
            text = "\n".join(f"{v} x{n}" if n > 1 else v for v, n in counts.items())
            if value is not None and value in cell:
                mean = pd.to_numeric(cell[value], errors="coerce").mean()
                text += f"\n{value}={mean:.3g}" if pd.notna(mean) else f"\n{value}=n/a"
            ax.text(x0 + 0.5, y0 + 0.5, text, ha="center", va="center", fontsize=8)
            ax.add_patch(Rectangle((x0, y0), 1, 1, fill=False, ec="white", lw=2))
    ax.set_xlim(0, len(clabels))
    ax.set_ylim(0, len(rlabels))
    ax.set_xticks(np.arange(len(clabels)) + 0.5, clabels, rotation=20, ha="right")
    ax.set_yticks(np.arange(len(rlabels)) + 0.5, list(reversed(rlabels)))
    ax.set_xlabel(" / ".join(cols))
    ax.set_ylabel(" / ".join(rows))
    ax.set_title("verdict per cell")
    _verdict_legend(ax, verdicts, bbox_to_anchor=(1.01, 1), loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def plot_bars(
    df: pd.DataFrame,
    by: str | Sequence[str],
    metrics: str | Sequence[str] = ("voids", "flips", "out_tok_s"),
    orient: str = "auto",
) -> Figure:
    """One panel per metric, one bar per group (mean, whiskers = min..max over runs),
    coloured by the group's most common verdict and labelled with its run count.

    `orient="h"` draws horizontal bars with the group labels once, on the left (readable
    with many groups or long labels); `"v"` vertical; `"auto"` picks "h" for more than six
    groups or labels longer than 24 characters."""
    by, metrics = _as_list(by), _as_list(metrics)
    table = compare(df, by=by, metrics=metrics)
    verdict_cols = [c for c in table.columns if c.startswith("n_")]
    first = table[table["metric"] == metrics[0]] if metrics else table
    all_labels = ["/".join(str(v) for v in r) for r in first[by].itertuples(index=False)]
    longest = max((len(lab) for lab in all_labels), default=0)
    if orient == "auto":
        orient = "h" if len(all_labels) > 6 or longest > 24 else "v"
    if orient not in ("h", "v"):
        raise ValueError(f"orient must be 'h', 'v' or 'auto', not {orient!r}")
    horizontal = orient == "h"
    if horizontal:
        size = (0.07 * longest + 2.8 * len(metrics), max(2.5, 1.0 + 0.32 * len(all_labels)))
    else:
        size = (max(5.0, 3.6 * len(metrics)), 3.8)
    fig, axes = plt.subplots(1, len(metrics), figsize=size, squeeze=False, sharey=horizontal)
    seen: list[str] = []
    for k, (ax, metric) in enumerate(zip(axes[0], metrics)):
        part = table[table["metric"] == metric].reset_index(drop=True)
        labels = ["/".join(str(v) for v in r) for r in part[by].itertuples(index=False)]
        majority = [
            part.loc[i, verdict_cols].astype(int).idxmax()[2:] if verdict_cols else "?"
            for i in range(len(part))
        ]
        seen += [m for m in dict.fromkeys(majority) if m not in seen]
        pos = np.arange(len(part))
        mean = part["mean"].to_numpy(dtype=float)
        err = np.vstack([mean - part["min"], part["max"] - mean]).astype(float)
        colors = [verdict_color(v) for v in majority]
        tops = part["max"].to_numpy(dtype=float)
        if horizontal:
            ax.barh(pos, np.nan_to_num(mean), color=colors)
            ax.errorbar(mean, pos, xerr=np.nan_to_num(err), fmt="none", ecolor="0.3", capsize=3)
            for yi, top, n in zip(pos, tops, part["runs"]):
                text = f" n={n}" if np.isfinite(top) else " n/a"
                ax.annotate(text, (np.nan_to_num(top), yi), ha="left", va="center", fontsize=7)
            if k == 0:
                ax.set_yticks(pos, labels, fontsize=8)
                ax.invert_yaxis()  # first group on top, like a table
            ax.margins(x=0.15)
            ax.grid(axis="x", alpha=0.3)
        else:
            ax.bar(pos, np.nan_to_num(mean), color=colors)
            ax.errorbar(pos, mean, yerr=np.nan_to_num(err), fmt="none", ecolor="0.3", capsize=3)
            for xi, top, n in zip(pos, tops, part["runs"]):
                ax.annotate(
                    f"n={n}" if np.isfinite(top) else "n/a",
                    (xi, np.nan_to_num(top)),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
            ax.set_xticks(pos, labels, rotation=30, ha="right", fontsize=8)
            ax.set_xlabel(" / ".join(by), fontsize=8)
        ax.set_title(metric)
    _verdict_legend(axes[0][-1], seen, fontsize=7, loc="best")
    if horizontal:  # what the labels are made of, once, above them
        fig.suptitle("groups: " + " / ".join(by), fontsize=8, x=0.01, ha="left")
    fig.tight_layout()
    return fig


def plot_latency(
    requests: pd.DataFrame,
    by: str | Sequence[str],
    served_only: bool = True,
) -> Figure:
    """TTFT and ITL distributions per group, as empirical CDFs: tails matter more
    than means for scheduling policies, and ECDFs overlay without binning choices."""
    by = _as_list(by)
    missing = [c for c in by if c not in requests]
    if missing:
        raise KeyError(
            f"plot_latency: {missing} not in the requests frame; "
            "load it with load_requests(runs_df) to carry the config choices along"
        )
    req = requests
    if served_only and "outcome" in req:
        req = req[req["outcome"] == "served"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, col, title in zip(axes, ("ttft_ms", "itl_ms"), ("TTFT (ms)", "ITL (ms)")):
        spread = pd.to_numeric(req[col], errors="coerce")
        spread = spread[spread > 0]
        # Log only when values span more than a decade; otherwise ticks vanish.
        log = len(spread) > 0 and spread.max() / spread.min() > 20
        for key, part in req.groupby(by, dropna=False, observed=True, sort=True):
            vals = np.sort(pd.to_numeric(part[col], errors="coerce").dropna().to_numpy())
            vals = vals[vals > 0]
            if vals.size == 0:
                continue
            y = np.arange(1, vals.size + 1) / vals.size
            ax.step(vals, y, where="post", label=f"{group_label(key, by)} (n={vals.size})")
        if log:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(title)
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
        ax.set_title(f"{title} distribution")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout()
    if handles:
        # Below the panels: group labels are long and would hide the curves' tails.
        fig.legend(
            handles,
            labels,
            fontsize=7,
            loc="upper center",
            ncol=min(2, len(labels)),
            bbox_to_anchor=(0.5, 0.0),
        )
    return fig
