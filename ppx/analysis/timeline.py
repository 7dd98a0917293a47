"""Single-run figures: the wait-for graph and throughput across phase flips (the
channel-operation timeline lives in `ppx.analysis.ops`).

The wait-for graph is drawn with plain matplotlib (ranks on a circle, curved arrows) so the
post-mortem needs no graph library; two ranks waiting on each other get two distinct arcs.
"""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Circle, Patch

from ppx.analysis.load import PathLike, load_events, load_series
from ppx.analysis.postmortem import flip_windows, group_series, load_postmortem


def node_name(rank: int) -> str:
    return "sup" if rank < 0 else f"rank{rank}"


def plot_waitfor(run_dir: PathLike) -> Figure:
    """Draw `postmortem/waitfor.json`: ranks as nodes, "waits for" as labelled arrows,
    the edges on the detected cycle in red."""
    pm = load_postmortem(run_dir)
    edges = [(int(e["src"]), int(e["dst"]), str(e.get("label", ""))) for e in pm.waitfor["edges"]]
    if not edges:
        edges = pm.cycle_edges  # fall back to the cycle string when the graph is missing
    nodes = sorted(
        {int(n) for n in pm.waitfor.get("nodes", [])} | {r for e in edges for r in e[:2]}
    )
    on_cycle = {(s, d) for s, d, _ in pm.cycle_edges}
    pairs = {(s, d) for s, d, _ in edges}
    fig, ax = plt.subplots(figsize=(5.5, 5.0))
    ax.set_aspect("equal")
    ax.axis("off")
    title = f"wait-for graph — {pm.verdict or '?'}"
    if not nodes:
        ax.text(0.5, 0.5, "no wait-for graph in this run", ha="center", va="center")
        ax.set_title(title)
        return fig
    # rank0 on the left, then clockwise: with two ranks the arcs bow up and down, which
    # leaves room for long horizontal labels.
    pos = {
        n: (
            math.cos(math.pi - 2 * math.pi * i / len(nodes)),
            math.sin(math.pi - 2 * math.pi * i / len(nodes)),
        )
        for i, n in enumerate(nodes)
    }
    radius = 0.17
    for src, dst, label in edges:
        red = (src, dst) in on_cycle
        color, width = ("#d32f2f", 2.2) if red else ("0.45", 1.2)
        (x1, y1), (x2, y2) = pos[src], pos[dst]
        if src == dst:  # a rank waiting on itself: a note beside the node, not an arrow
            ax.text(x1, y1 - radius - 0.12, f"self: {label}", ha="center", fontsize=8, color=color)
            continue
        rad = 0.35
        mid_dot = (x1 + x2) * (y2 - y1) - (y1 + y2) * (x2 - x1)
        if (dst, src) not in pairs and mid_dot < -1e-9:
            # Bow lone edges away from the centre, so labels sit outside the ring; a pair
            # of opposite edges keeps one sign and thereby gets two separate arcs.
            rad = -rad
        ax.annotate(
            "",
            xy=(x2, y2),
            xytext=(x1, y1),
            arrowprops={
                "arrowstyle": "-|>",
                "color": color,
                "lw": width,
                "shrinkA": 22,
                "shrinkB": 22,
                "connectionstyle": f"arc3,rad={rad}",
                "mutation_scale": 16,
            },
        )
        # Midpoint of matplotlib's arc3 Bezier: halfway to its control point.
        ox, oy = 0.5 * rad * (y2 - y1), -0.5 * rad * (x2 - x1)
        mx, my = (x1 + x2) / 2 + ox, (y1 + y2) / 2 + oy
        # Anchor the label on the arc's outer side so opposite arcs' labels never overlap.
        ha = "left" if ox > 0.05 else "right" if ox < -0.05 else "center"
        va = "bottom" if oy > 0.05 else "top" if oy < -0.05 else "center"
        ax.text(
            mx,
            my,
            label,
            ha=ha,
            va=va,
            fontsize=8,
            color=color,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": color, "lw": 0.6},
        )
    for n, (x, y) in pos.items():
        ax.add_patch(Circle((x, y), radius, facecolor="#eceff1", edgecolor="0.2", zorder=3))
        ax.text(x, y, node_name(n), ha="center", va="center", fontsize=9, zorder=4)
    ax.set_xlim(-1.5, 1.5)
    ax.set_ylim(-1.5, 1.5)
    if pm.cycle:
        title += f"\n{pm.cycle}"
    elif pm.reason:
        title += "\n" + textwrap.fill(pm.reason, 70)
    if not edges:
        ax.text(0, 0, "no wait-for edges recorded", ha="center", va="center", color="0.4")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_flip_timeline(run_dir: PathLike) -> Figure:
    """Group throughput over time with every flip window shaded and TP phases tinted,
    above cumulative voids and retractions, so the cost of each flip reads off directly."""
    series = group_series(load_series(run_dir))
    events = load_events(run_dir)
    flips = flip_windows(events)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 5.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    if len(series):
        top.step(series["t_s"], series["out_tok_s"], where="post", color="#1e88e5", lw=1.2)
        _shade_phases(top, series)
    end_t = max([0.0] + [float(x["t_s"].max()) for x in (series, events) if len(x)])
    for ax in (top, bottom):
        for f in flips.itertuples(index=False):
            stop = f.end_s if pd.notna(f.end_s) else end_t
            ax.axvspan(f.start_s, max(stop, f.start_s + 1e-3), color="#ff9800", alpha=0.35, lw=0)
    top.set_ylabel("out tok/s (group)")
    top.set_title(f"throughput across flips ({len(flips)} flips)", fontsize=10)
    for kind, color, name in (("void", "#8e24aa", "voids"), ("retract", "#e53935", "retractions")):
        t = np.sort(events.loc[events["kind"] == kind, "t_s"].to_numpy(dtype=float))
        if t.size:
            bottom.step(
                np.r_[0.0, t, end_t],
                np.r_[0, np.arange(1, t.size + 1), t.size],
                where="post",
                color=color,
                label=f"{name} ({t.size})",
            )
            bottom.plot(t, np.zeros_like(t), "|", color=color, ms=10)
        else:
            bottom.plot([], [], color=color, label=f"{name} (0)")
    bottom.set_ylabel("cumulative")
    bottom.set_xlabel("t (s since run start)")
    handles, labels = bottom.get_legend_handles_labels()
    handles += [Patch(facecolor="#ff9800", alpha=0.35), Patch(facecolor="#e3f2fd")]
    labels += ["flip window", "tp phase"]
    bottom.legend(handles, labels, fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def _shade_phases(ax, series: pd.DataFrame) -> None:
    if "phase" not in series:
        return
    t = series["t_s"].to_numpy(dtype=float)
    phase = series["phase"].astype(str).to_numpy()
    start = None
    for i in range(len(t)):
        if phase[i] == "tp" and start is None:
            start = t[i]
        if start is not None and (phase[i] != "tp" or i == len(t) - 1):
            ax.axvspan(start, t[i], color="#e3f2fd", zorder=0, lw=0)
            start = None
