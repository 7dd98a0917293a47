"""Analysis of ppx run stores: load runs into pandas, compare policies, draw figures.

The usual loop::

    import ppx.analysis as pa
    runs = pa.load_runs("outputs/studies/ordering_matrix/<ts>/runs")
    pa.compare(runs, by=["admission", "guard"], metrics=["voids", "out_tok_s"])
    pa.plot_verdict_grid(runs, rows=["admission", "guard"], cols="ordering")
    pa.plot_waitfor(runs.query("verdict == 'wedged'").run_dir.iloc[0])
"""

from __future__ import annotations

from ppx.analysis.compare import compare, verdict_counts, wide
from ppx.analysis.export import save_figure, save_table
from ppx.analysis.load import (
    load_events,
    load_requests,
    load_runs,
    load_series,
    load_summary,
    override_value,
    read_overrides,
    with_overrides,
)
from ppx.analysis.ops import plot_ops_timeline
from ppx.analysis.plots import plot_bars, plot_latency, plot_verdict_grid
from ppx.analysis.postmortem import (
    Postmortem,
    cycle_ranks,
    cycle_table,
    cycle_words,
    flip_impact,
    flip_windows,
    group_series,
    load_postmortem,
    parse_cycle,
)
from ppx.analysis.schema import VERDICT_COLORS, VERDICTS
from ppx.analysis.timeline import plot_flip_timeline, plot_waitfor
from ppx.analysis.wandb_io import load_wandb

__all__ = [
    "VERDICTS",
    "VERDICT_COLORS",
    "Postmortem",
    "compare",
    "cycle_ranks",
    "cycle_table",
    "cycle_words",
    "flip_impact",
    "flip_windows",
    "group_series",
    "load_events",
    "load_postmortem",
    "load_requests",
    "load_runs",
    "load_series",
    "load_summary",
    "load_wandb",
    "parse_cycle",
    "plot_bars",
    "plot_flip_timeline",
    "plot_latency",
    "plot_ops_timeline",
    "plot_verdict_grid",
    "plot_waitfor",
    "override_value",
    "read_overrides",
    "save_figure",
    "save_table",
    "verdict_counts",
    "wide",
    "with_overrides",
]
