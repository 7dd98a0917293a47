"""Every notebook runs headless, as committed, against runs the engine produced.

The runs are real by default (the smoke study's served and wedged cells, and one flip
run: see run_source.py; `PPX_ANALYSIS_RUNS=fake` swaps in synthetic ones). The committed
.ipynb is executed (that is what JupyterLab opens) after its `parameters` cell is
extended; it must draw its figures (image/png outputs and PNG files in out_dir) and write
tables with the expected rows. A separate check keeps the .ipynb in sync with the .py.
"""

from __future__ import annotations

import jupytext
import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient
from run_source import REPO

NOTEBOOKS = REPO / "notebooks"


def _execute(name: str, params: dict[str, object], monkeypatch) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{name}: exactly one parameters cell"
    # Appended, like papermill's injected cell: defaults the test leaves alone still apply.
    cells[0].source += "\n# injected by the test\n" + "\n".join(
        f"{k} = {v!r}" for k, v in params.items()
    )
    # The kernel inherits our environment: let it pick the inline backend. It runs in
    # notebooks/ like JupyterLab would, so the notebook must find `ppx` by itself.
    monkeypatch.delenv("MPLBACKEND", raising=False)
    client = NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    return nb


def _stdout(nb: nbformat.NotebookNode) -> str:
    return "".join(
        out.get("text", "")
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )


def _pngs(nb: nbformat.NotebookNode) -> int:
    return sum(
        1
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") in ("display_data", "execute_result")
        and "image/png" in out.get("data", {})
    )


@pytest.mark.parametrize("name", ["compare", "postmortem", "flip_timeline"])
def test_ipynb_matches_py(name: str) -> None:
    py = jupytext.read(NOTEBOOKS / f"{name}.py")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert [c.source for c in py.cells] == [c.source for c in nb.cells], (
        f"{name}.ipynb is out of date: run `jupytext --sync notebooks/{name}.py`"
    )
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "strip outputs"


def test_compare_notebook(generated, tmp_path, monkeypatch) -> None:
    out = tmp_path / "out"
    params = {
        "runs_root": str(generated.runs_root),
        "out_dir": str(out),
        "override_keys": ["engine/ordering", "watch.stall_s"],  # not config choices
    }
    nb = _execute("compare", params, monkeypatch)
    assert _pngs(nb) >= 3
    for fig in ("verdict_grid", "bars", "latency"):
        assert (out / f"{fig}.png").stat().st_size > 1000
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == generated.n_runs
    assert {"served", "wedged"} <= set(runs["verdict"])
    assert (runs["engine/ordering"] == runs["ordering"]).all()  # override, else the choice
    if generated.source == "real":
        assert (runs["watch.stall_s"] == 2).all()  # the smoke study's base override
    table = pd.read_csv(out / "compare.csv")
    groups = runs.groupby(["admission", "guard", "ordering"]).ngroups
    assert len(table) == groups * 6  # one row per group x metric
    assert table["runs"].sum() == generated.n_runs * 6
    failed = pd.read_csv(out / "failed.csv")
    assert len(failed) >= 1 and set(failed["verdict"]) - {"served"}
    # The flush_before_decision run, with the cycle its commit (f31fd5e) describes.
    assert failed["cycle"].str.startswith("rank0 -[flush chain]-> rank1").any()


def test_postmortem_notebook(generated, tmp_path, monkeypatch) -> None:
    out = tmp_path / "out"
    nb = _execute(
        "postmortem",
        {
            "run_dir": None,
            "runs_root": str(generated.runs_root),
            "out_dir": str(out),
            "last_s": None,
        },
        monkeypatch,
    )
    assert _pngs(nb) >= 2
    assert (out / "waitfor.png").exists() and (out / "ops_timeline.png").exists()
    assert "verdict: wedged" in _stdout(nb)
    cycle = pd.read_csv(out / "cycle.csv")
    assert set(cycle["waiter"]) == {"rank0", "rank1"}  # pp=2: the whole ring waits
    last = pd.read_csv(out / "last_events.csv")
    assert {"t_s", "rank", "kind"} <= set(last.columns)  # rows only where the engine kept any


def test_flip_notebook(generated, tmp_path, monkeypatch) -> None:
    out = tmp_path / "out"
    nb = _execute(
        "flip_timeline",
        {
            "run_dir": None,
            "runs_root": str(generated.flip_root),
            "out_dir": str(out),
            "window_s": 0.5,
        },
        monkeypatch,
    )
    assert _pngs(nb) >= 1
    assert (out / "flip_timeline.png").exists()
    assert "flips: 0" not in _stdout(nb)  # it picked a run that flipped
    impact = pd.read_csv(out / "flip_impact.csv")
    assert len(impact) >= 1
    assert {"cutover_ms", "voids", "retractions"} <= set(impact.columns)
    assert (impact["cutover_ms"] > 0).all()
