from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ppx_helpers import pids_alive, run_ppx  # noqa: E402


@pytest.fixture
def ppx_run(tmp_path):
    def _run(*overrides, name="run", **kw):
        d = tmp_path / name
        proc, summary = run_ppx(str(d), *overrides, **kw)
        assert pids_alive(str(d)) == [], "a rank process outlived its run"
        return proc, summary, str(d)

    return _run
