"""The mutant zoo (benchmarks/mutants/zoo.py) stays applicable: every patch's text occurs
exactly once in today's code, so a refactor that moves a mutated line fails here, in the
suite, not an hour into a zoo run (the runner refuses such a mutant by name)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _zoo():
    path = os.path.join(ROOT, "benchmarks", "mutants", "zoo.py")
    spec = importlib.util.spec_from_file_location("zoo_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["zoo_under_test"] = mod  # dataclasses look their module up while building
    spec.loader.exec_module(mod)
    return mod.ZOO


ZOO = _zoo()


@pytest.mark.parametrize("m", ZOO, ids=[m.name for m in ZOO])
def test_each_mutant_patches_exactly_one_spot(m):
    with open(os.path.join(ROOT, m.path)) as f:
        text = f.read()
    assert text.count(m.old) == 1, f"{m.name}: {m.path} holds its text {text.count(m.old)} times"
    assert m.new != m.old and text.replace(m.old, m.new) != text


def test_the_zoo_is_at_least_twenty_bugs_over_the_areas():
    assert len(ZOO) >= 20 and len({m.area for m in ZOO}) >= 7
