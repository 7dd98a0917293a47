"""Fixtures for the analysis/study tests, built once per session: synthetic run stores
(for the loader/plot/expectation tests that need exact, known contents) and the real runs
(the smoke study and a flip run, see run_source.py) the notebooks and the end-to-end study
test use."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # in-process only; notebook kernels pick their own (inline) backend

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    # The helpers here are imported as top-level modules (tests/ is not a package).
    sys.path.insert(0, str(HERE))

from fake_runs import MATRIX, write_run, write_sweep  # noqa: E402
from run_source import RUN_SOURCE, GeneratedRuns, fake_runs, real_runs  # noqa: E402


@pytest.fixture(scope="session")
def real_session_runs(tmp_path_factory) -> GeneratedRuns:
    """The smoke study (`python -m ppx.study smoke_study`) and one flip run, for real."""
    return real_runs(tmp_path_factory.mktemp("real"))


@pytest.fixture(scope="session")
def generated(request, tmp_path_factory) -> GeneratedRuns:
    """The notebooks' runs: real by default, synthetic with PPX_ANALYSIS_RUNS=fake."""
    if RUN_SOURCE == "fake":
        return fake_runs(tmp_path_factory.mktemp("nbruns"))
    if RUN_SOURCE != "real":
        pytest.fail(f"PPX_ANALYSIS_RUNS must be real or fake, not {RUN_SOURCE!r}")
    runs = request.getfixturevalue("real_session_runs")
    if runs.n_runs < 2 or not runs.has_flips:
        logs = "\n\n".join(p.describe() for p in runs.procs.values())
        pytest.fail(f"the engine did not produce the notebook runs:\n{logs}")
    return runs


@pytest.fixture(scope="session")
def matrix_root(tmp_path_factory) -> Path:
    """A 2x2x2 multirun: 8 jobs, the flush_before_decision half wedged."""
    root = tmp_path_factory.mktemp("matrix")
    write_sweep(root, MATRIX, base=["+exp=smoke", "pp=2"], study="ordering_matrix")
    return root


@pytest.fixture(scope="session")
def flip_run(tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("flip") / "0", ["+exp=smoke", "flip=every_40_passes"])


@pytest.fixture(scope="session")
def wedged_run(tmp_path_factory) -> Path:
    overrides = ["+exp=smoke", "pp=3", "engine/ordering=flush_before_decision"]
    return write_run(tmp_path_factory.mktemp("wedged") / "0", overrides)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")
