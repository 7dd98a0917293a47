"""Every plotting helper returns a drawable Figure on synthetic runs (and degrades to a
labelled empty figure when the files it draws from are absent)."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import ppx.analysis as pa
from ppx.analysis.schema import VERDICT_COLORS


def _texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts + [ax.title])


def test_verdict_grid_colours_cells(matrix_root, tmp_path) -> None:
    runs = pa.load_runs(matrix_root)
    fig = pa.plot_verdict_grid(runs, rows=["admission", "guard"], cols="ordering", value="voids")
    ax = fig.axes[0]
    colours = {r.get_facecolor()[:3] for r in ax.patches if isinstance(r, Rectangle) and r.fill}
    from matplotlib.colors import to_rgb

    assert to_rgb(VERDICT_COLORS["served"]) in colours
    assert to_rgb(VERDICT_COLORS["wedged"]) in colours
    assert len(ax.get_yticklabels()) == 4 and len(ax.get_xticklabels()) == 2
    assert "voids=" in _texts(fig)
    path = pa.save_figure(fig, tmp_path, "grid")
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert pa.save_figure(fig, None, "grid") is None


def test_bars_and_latency(matrix_root) -> None:
    runs = pa.load_runs(matrix_root)
    fig = pa.plot_bars(runs, by=["ordering", "guard"], metrics=["voids", "flips", "out_tok_s"])
    assert [ax.get_title() for ax in fig.axes] == ["voids", "flips", "out_tok_s"]
    assert len(fig.axes[0].patches) >= 4
    fig = pa.plot_latency(pa.load_requests(runs), by="guard")
    assert len(fig.axes) == 2 and all(len(ax.lines) == 2 for ax in fig.axes)


def test_bars_turn_horizontal_for_many_groups(matrix_root) -> None:
    runs = pa.load_runs(matrix_root)
    by = ["admission", "guard", "ordering"]  # 8 groups: too many to read side by side
    fig = pa.plot_bars(runs, by=by, metrics=["voids", "out_tok_s"])
    first, second = fig.axes[:2]
    labels = [t.get_text() for t in first.get_yticklabels()]
    assert len(labels) == 8 and labels[0] == "decision/prefix/decision_first"
    assert not [t.get_text() for t in first.get_xticklabels() if "/" in t.get_text()]
    assert first.get_ylim()[0] > first.get_ylim()[1]  # first group on top
    assert second.get_shared_y_axes().joined(first, second)
    assert "groups: admission / guard / ordering" in fig._suptitle.get_text()
    fig = pa.plot_bars(runs, by=by, metrics=["voids"], orient="v")
    assert len([t for t in fig.axes[0].get_xticklabels() if t.get_text()]) == 8
    with pytest.raises(ValueError, match="orient"):
        pa.plot_bars(runs, by=by, orient="diagonal")


def test_latency_needs_choice_columns(matrix_root) -> None:
    import pytest

    with pytest.raises(KeyError, match="load_requests"):
        pa.plot_latency(pa.load_requests(matrix_root), by="guard")


def test_waitfor_and_ops_timeline(wedged_run) -> None:
    fig = pa.plot_waitfor(wedged_run)
    text = _texts(fig)
    assert "rank0" in text and "recv decision slot=1" in text and "wedged" in text
    fig = pa.plot_ops_timeline(wedged_run)
    assert "stall" in _texts(fig)
    assert "recv decision slot=1 peer=0 — blocked 2.0s" in _texts(fig)  # from blocked_on
    assert len(fig.axes[0].get_yticklabels()) == 3
    assert pa.plot_ops_timeline(wedged_run, last_s=0.2).axes


def test_single_run_plots_without_postmortem(matrix_root, flip_run) -> None:
    served = matrix_root / "0"
    assert "no wait-for graph" in _texts(pa.plot_waitfor(served))
    assert "no channel operations" in _texts(pa.plot_ops_timeline(served))
    fig = pa.plot_flip_timeline(flip_run)
    assert len(fig.axes) == 2 and "flips" in fig.axes[0].get_title()
    labels = fig.axes[1].get_legend_handles_labels()[1]
    assert any(lab.startswith("voids") for lab in labels)
    assert "(0 flips)" in pa.plot_flip_timeline(served).axes[0].get_title()


def test_ops_timeline_without_blocked_on(tmp_path) -> None:
    import json

    from fake_runs import write_run

    run = write_run(tmp_path / "r", ["faults=kill_rank"])
    (run / "postmortem" / "blocked_on.json").write_text(json.dumps([None, None]))
    summary = json.loads((run / "summary.json").read_text())
    summary["blocked_on"] = None
    (run / "summary.json").write_text(json.dumps(summary))
    text = _texts(pa.plot_ops_timeline(run))
    assert "blocked" not in text.replace("blocked_on", "") and "peer=" in text
