from __future__ import annotations

import os
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# triton fixes interpret vs compile for its own library at its first import, and a test file
# (transformers, torch internals) may import it before the kernel tests ask for the
# interpreter: under xdist any file can run first in a worker. The CPU tests want the
# interpreter, so it is in place before anything imports triton.
if not os.environ.get("PPX_TEST_DEVICE", "cpu").startswith("cuda"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

from ppx_helpers import pids_alive, run_ppx  # noqa: E402


@pytest.fixture
def ppx_run(tmp_path):
    def _run(*overrides, name="run", **kw):
        d = tmp_path / name
        proc, summary = run_ppx(str(d), *overrides, **kw)
        assert pids_alive(str(d)) == [], "a rank process outlived its run"
        return proc, summary, str(d)

    return _run


@pytest.fixture
def engine(tmp_path):
    """engine(*overrides) -> (summary, run_dir): a real run, booted in-process."""
    from ppx_helpers import run_inproc

    counter = iter(range(1000))

    def _run(*overrides):
        d = str(tmp_path / f"run{next(counter)}")
        return run_inproc(d, *overrides), d

    return _run


@pytest.fixture
def plant(tmp_path, monkeypatch):
    """plant(body): every process spawned from now on runs `body` at start-up (a
    sitecustomize on PYTHONPATH: a bug planted in real gloo ranks, engine.start_method=spawn)."""

    def _plant(body: str) -> None:
        d = tmp_path / "planted"
        d.mkdir()
        src = "import os\nif os.environ.get('PPX_PLANT') == '1':\n" + textwrap.indent(
            textwrap.dedent(body), "    "
        )
        (d / "sitecustomize.py").write_text(src)
        monkeypatch.setenv("PPX_PLANT", "1")
        monkeypatch.setenv(
            "PYTHONPATH", os.pathsep.join([str(d), os.environ.get("PYTHONPATH", "")])
        )

    return _plant
