"""The scenario generator draws repeated prompts (`workload.bench.repeat_count`): a copy
admitted after the one before it meets its whole prompt in the radix tree, the corner a
radix match that covers the whole prompt (zoo `match_whole_prompt`) needs to show."""

from __future__ import annotations

from explore_helpers import explorer_cfg, whole_prompt_match
from hypothesis import HealthCheck, given, settings

from ppx.sim.runner import Runner
from ppx.sim.scenario import Load, Scenario, compose, scenarios
from ppx.sim.schedule import config_hash
from ppx.sim.strategy import RandomStrategy

DESIGN = ["pp=3", "engine/admission=decision", "engine/ordering=decision_first"]
DESIGN += ["engine/guard=rid"]
TWICE = Scenario(Load(num_requests=2, repeat_count=2))


def test_repeats_are_drawn_and_compose_to_the_bench_key():
    drawn: list[int] = []

    @settings(
        max_examples=60, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(scenarios(explorer_cfg(*DESIGN)))
    def collect(sc: Scenario) -> None:
        drawn.append(sc.load.repeat_count)

    collect()
    assert {1, 2, 3} <= set(drawn)
    base = explorer_cfg(*DESIGN)
    assert "workload.bench.repeat_count=2" in TWICE.overrides(3)
    mine = compose(base, TWICE)
    assert mine.workload.bench.repeat_count == 2
    assert config_hash(mine) == config_hash(explorer_cfg(*DESIGN, *TWICE.overrides(3)))
    # red arm: no repeat is no override, so a replay line without repeats stays as it was
    assert not any("repeat_count" in o for o in Scenario().overrides(3))


def test_a_whole_prompt_match_is_reached_only_through_a_repeat(monkeypatch):
    whole_prompt_match(monkeypatch)
    base = explorer_cfg(*DESIGN)
    found = Runner(compose(base, TWICE)).run(RandomStrategy(0))
    assert found.verdict == "stopped" and found.row["reason"].startswith("admission: rid 1")
    # red arm: two fresh prompts never find a whole one in the tree
    once = Runner(compose(base, Scenario(Load(num_requests=2)))).run(RandomStrategy(0))
    assert once.verdict == "served"
