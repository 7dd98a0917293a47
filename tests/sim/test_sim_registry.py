"""The explorer's switches through one registry (ppx/sim/registry.py), and one `Strategy`
interface: an unknown value is refused with one line naming it and what it may be, as the
protocol registry refuses a design; a strategy that does not implement the interface cannot
be made; no module compares `explore.strategy` or `explore.reduce` with a string."""

from __future__ import annotations

import pathlib
import re

import pytest
from omegaconf import OmegaConf
from ppx_helpers import ROOT, compose

from ppx.config import ConfigError
from ppx.sim import registry
from ppx.sim.strategy import RandomStrategy, Strategy


@pytest.mark.parametrize(
    "overrides, line",
    [
        (["explore.strategy=bfs"], "explore.strategy='bfs': random | pct | dfs | portfolio"),
        (["explore.reduce=dpor"], "explore.reduce='dpor': sleep | none"),
        (["explore.strategy=portfolio", "explore.portfolio=[random,exhaustive]"],
         "explore.portfolio=['random', 'exhaustive']: a non-empty list of random | pct | dfs"),
        # the reduction's footprints miss the NCCL plane's waits: refused for every walk
        (["explore.strategy=exhaustive", "sim.semantics=nccl", "engine.transport=sim"],
         "explore.reduce=sleep with sim.semantics=nccl"),
    ],
)  # fmt: skip
def test_a_bad_switch_is_refused_with_one_line(overrides, line):
    with pytest.raises(ConfigError) as e:
        compose(*overrides)
    assert str(e.value).startswith(line) and "\n" not in str(e.value)


def test_every_known_value_resolves_and_a_portfolio_names_its_members():
    for name in registry.STRATEGIES:
        x = OmegaConf.create({"strategy": name, "reduce": "none", "portfolio": ["random", "pct"]})
        assert registry.refusal(x) is None
        assert registry.strategy_of(x).name == name
    x = OmegaConf.create({"strategy": "portfolio", "reduce": "sleep", "portfolio": ["pct", "dfs"]})
    assert [k.name for k in registry.members_of(x)] == ["pct", "dfs"]
    assert registry.reduction_of(x).sleep and not registry.REDUCTIONS["none"].sleep


def test_a_strategy_implements_the_interface():
    assert not RandomStrategy.watches_steps and RandomStrategy(0).choose([2, 5], 0, None) in (2, 5)

    class NoChoice(Strategy):  # red: the one method every strategy must have is missing
        pass

    with pytest.raises(TypeError):
        NoChoice()


# `x.strategy == "dfs"`, `cfg.explore.reduce != 'sleep'`, `"pct" in x.portfolio`...
_COMPARED = re.compile(
    r"""(?:\b(?:strategy|reduce)\s*[!=]=\s*["']|["']\w+["']\s+(?:not\s+)?in\s+\S*portfolio)"""
)


def _comparisons(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if _COMPARED.search(line)]


def test_no_module_compares_the_switches_with_a_string():
    found = {}
    for path in pathlib.Path(ROOT, "ppx").rglob("*.py"):
        hits = _comparisons(path.read_text())
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert found == {}
    # red: the comparisons the registry replaced are what the scan finds
    old = 'dfs = x.strategy == "dfs" or (x.strategy == "portfolio" and "dfs" in list(x.portfolio))'
    assert _comparisons(old) == [old]
    assert _comparisons("if x.reduce == 'sleep':") == ["if x.reduce == 'sleep':"]
