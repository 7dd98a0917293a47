"""Fixtures for the analysis/study tests: synthetic run stores built once per session."""

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


@pytest.fixture(scope="session")
def matrix_root(tmp_path_factory) -> Path:
    """A 2x2x2 multirun: 8 jobs, the flush_before_decision half wedged."""
    root = tmp_path_factory.mktemp("matrix")
    write_sweep(root, MATRIX, base=["+exp=smoke", "pp=2"], study="ordering_matrix")
    return root


@pytest.fixture(scope="session")
def flip_run(tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("flip") / "0", ["+exp=smoke", "flip=every_1s"])


@pytest.fixture(scope="session")
def wedged_run(tmp_path_factory) -> Path:
    overrides = ["+exp=smoke", "pp=3", "engine/ordering=flush_before_decision"]
    return write_run(tmp_path_factory.mktemp("wedged") / "0", overrides)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")
