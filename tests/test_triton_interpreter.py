"""triton's interpreter before 3.7 cannot run ppx's kernels (a loop bound read from memory
through a program id, a one-element array there: seen on a GPU image's triton 3.6.0 as 47
failed kernel tests); ppx refuses that configuration by name before anything is spawned."""

from __future__ import annotations

import importlib.metadata

from ppx_helpers import assert_refused, compose

from ppx.engine.kernels.registry import interpreter_problem


def test_an_interpreter_before_3_7_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.6.0")
    assert interpreter_problem().startswith("triton 3.6.0's interpreter cannot run ppx's kernels")
    assert_refused(
        ["engine/kernels=triton", "device=cpu"],
        "engine/kernels=triton on device=cpu (the interpreter): triton 3.6.0's interpreter",
    )


def test_this_machines_triton_interprets_them():
    """The dev extra installs a triton whose interpreter runs the kernels (tests/kernels)."""
    assert interpreter_problem() is None
    assert compose("engine/kernels=triton", "device=cpu").engine.kernels.name == "triton"
