"""The per-rank channel-operation timeline of a stalled run.

`postmortem/ops.parquet` records operations that completed; the call a rank was stuck in
never completed, so it comes from `blocked_on` (op, peer, kind, slot and `since_s`, how
long it had been blocked when the watchdog fired). Drawing both shows where each rank
stopped and for how long.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ppx.analysis.load import PathLike, load_events
from ppx.analysis.postmortem import Postmortem, load_postmortem
from ppx.analysis.timeline import node_name

OP_COLORS = {
    "send": "#1e88e5",
    "recv": "#e53935",
    "flush": "#8e24aa",
    "compute": "#43a047",
    "pass": "#cfd8dc",
}


def blocked_by_rank(pm: Postmortem) -> dict[int, dict[str, Any]]:
    """`blocked_on` as {rank: entry}; entries name their rank, else the list index is it.
    Ranks that were not blocked (null entries) are absent."""
    raw = pm.blocked_on
    if isinstance(raw, dict):
        raw = [raw.get(k) for k in sorted(raw)]
    out: dict[int, dict[str, Any]] = {}
    for i, entry in enumerate(raw or []):
        if isinstance(entry, dict) and entry.get("op"):
            out[int(entry.get("rank", i))] = entry
    return out


def _op_end(ops: pd.DataFrame) -> pd.Series:
    return ops["t_s"].astype(float) + pd.to_numeric(ops["dur_s"], errors="coerce").fillna(0.0)


def stall_time(run_dir: PathLike, ops: pd.DataFrame, blocked: dict[int, dict]) -> float:
    """When the run stalled: a rank's own `stop` event if one was logged (a livelock is a
    stop too), else each blocked rank's last completed op plus how long it had been blocked
    (a wedge: the supervisor's `wedged` event is written later, after the teardown), else
    the last op's end."""
    events = load_events(run_dir)
    stall = events[events["kind"] == "stop"]
    if len(stall):
        return float(stall["t_s"].min())
    ends = _op_end(ops)
    guesses = [
        float(ends[ops["rank"] == r].max() if (ops["rank"] == r).any() else ends.max())
        + float(b["since_s"])
        for r, b in blocked.items()
        if b.get("since_s") is not None
    ]
    return max(guesses) if guesses else float(ends.max())


def _label(entry: dict[str, Any]) -> str:
    text = f"{entry.get('op', '?')} {entry.get('kind', '')}".strip()
    if entry.get("slot", -1) not in (-1, None):
        text += f" slot={entry['slot']}"
    if entry.get("peer", -1) not in (-1, None):
        text += f" peer={entry['peer']}"
    return text


def plot_ops_timeline(run_dir: PathLike, last_s: float | None = None) -> Figure:
    """Per-rank lanes: passes on top, channel operations (send/recv/flush/compute) below,
    up to the stall. The call each rank was blocked in is hatched from its start to the
    stall and labelled; `last_s` zooms to the last seconds before the stall."""
    pm = load_postmortem(run_dir)
    ops = pm.ops
    blocked = blocked_by_rank(pm)
    n_lanes = max(1, len(set(ops["rank"]) | set(blocked)))
    fig, ax = plt.subplots(figsize=(11, 1.0 + 1.1 * n_lanes))
    if ops.empty:
        ax.text(0.5, 0.5, "no channel operations recorded for this run", ha="center", va="center")
        ax.axis("off")
        return fig
    ops = ops.assign(end_s=_op_end(ops))
    stall = stall_time(run_dir, ops, blocked)
    lo = float(ops["t_s"].min()) if last_s is None else stall - last_s
    ops = ops[ops["end_s"] >= lo]
    ranks = sorted(set(ops["rank"]) | set(blocked))
    min_w = max(1e-4, (stall - lo) / 800)  # keep instantaneous ops visible
    for lane, rank in enumerate(ranks):
        y = len(ranks) - 1 - lane
        part = ops[ops["rank"] == rank].sort_values(["t_s", "seq"])
        passes = part[part["op"] == "pass"]
        for k, (t, d) in enumerate(zip(passes["t_s"], passes["end_s"] - passes["t_s"])):
            shade = "#cfd8dc" if k % 2 else "#b0bec5"
            ax.broken_barh([(t, max(d, min_w))], (y + 0.55, 0.3), facecolors=shade)
        chan = part[part["op"] != "pass"]
        for op, grp in chan.groupby("op"):
            spans = [(t, max(e - t, min_w)) for t, e in zip(grp["t_s"], grp["end_s"])]
            ax.broken_barh(spans, (y + 0.1, 0.4), facecolors=OP_COLORS.get(op, "0.5"))
        if rank in blocked:
            # The in-flight call: from the rank's last completed op (or since_s) to the stall.
            since = blocked[rank].get("since_s")
            start = float(chan["end_s"].max()) if len(chan) else stall - float(since or 0)
            entry, color = blocked[rank], OP_COLORS.get(blocked[rank].get("op"), "0.5")
            label = _label(entry) + (f" — blocked {since:.1f}s" if since is not None else "")
        elif len(chan):
            last = chan.iloc[-1]  # no blocked_on: the last recorded op is the best guess
            start, entry, color = float(last["t_s"]), last.to_dict(), "none"
            label = _label(entry)
        else:
            continue
        ax.broken_barh(
            [(start, max(stall - start, min_w))],
            (y + 0.1, 0.4),
            facecolors=color,
            edgecolors="black",
            hatch="///",
            alpha=0.6,
        )
        ax.text(max(start, lo), y + 0.02, label, fontsize=7, va="top")
    ax.set_xlim(lo, stall + 0.04 * max(stall - lo, 1e-3))
    ax.axvline(stall, color="#d32f2f", ls="--", lw=1.2)
    ax.text(stall, len(ranks) + 0.02, " stall", color="#d32f2f", fontsize=8, va="bottom")
    ax.set_yticks(np.arange(len(ranks)) + 0.5, [node_name(r) for r in reversed(ranks)])
    ax.set_ylim(-0.1, len(ranks) + 0.3)
    ax.set_xlabel("t (s since run start)")
    handles = [Patch(facecolor=c, label=o) for o, c in OP_COLORS.items()]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="blocked"))
    ax.legend(
        handles=handles, ncol=len(handles), fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.18)
    )
    title = f"channel ops up to the stall — {pm.verdict or '?'}"
    ax.set_title(title + (f": {pm.cycle}" if pm.cycle else ""), fontsize=9)
    fig.tight_layout()
    return fig
