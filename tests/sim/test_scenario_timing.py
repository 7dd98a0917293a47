"""The scenario generator draws `faults.timing` (fixed | choice) where a scenario has a timed
effect (a host-tier load, a delayed send, a flip's or a cache drop's pass count), and a drawn choice is an
override its replay carries: the same config, the same run from the recorded choices."""

from __future__ import annotations

from dataclasses import replace

from explore_helpers import explorer_cfg
from hypothesis import HealthCheck, given, settings

from ppx.sim.runner import Runner
from ppx.sim.scenario import Faults, Flips, Load, Pressure, Scenario, compose, scenarios
from ppx.sim.schedule import config_hash
from ppx.sim.strategy import RandomStrategy, ReplayStrategy

DESIGN = ["pp=2", "engine/admission=decision", "engine/ordering=decision_first"]


def _timed(sc: Scenario) -> bool:
    f = sc.faults
    return (
        sc.pressure.host_rank >= 0
        or f.delay_kind is not None
        or sc.flips.every > 0
        or f.cache_drop_rank >= 0
    )


def test_timing_is_drawn_only_where_a_timed_effect_is_on():
    drawn: list[Scenario] = []

    @settings(
        max_examples=80, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(scenarios(explorer_cfg(*DESIGN)))
    def collect(sc: Scenario) -> None:
        drawn.append(sc)

    collect()
    timings = {(_timed(sc), sc.faults.timing) for sc in drawn}
    # red arm: no scenario without a timed effect leaves a landing to the scheduler
    assert (False, "choice") not in timings
    assert {(True, "fixed"), (True, "choice"), (False, "fixed")} <= timings, timings


FLIPPING = Scenario(
    Load(num_requests=3, prefix_len=24, max_new=3, concurrency=2),
    pressure=Pressure(host_rank=1, prefetch_ms=50.0),
    flips=Flips(every=3, max_flips=1),
)


def test_a_chosen_timing_is_an_override_the_replay_command_composes():
    base = explorer_cfg(*DESIGN)
    chosen = replace(FLIPPING, faults=Faults(timing="choice"))
    assert "faults.timing=choice" in chosen.overrides(2)
    assert not any(o.startswith("faults.timing") for o in FLIPPING.overrides(2))  # fixed: none
    mine = compose(base, chosen)
    assert mine.faults.timing == "choice"
    assert config_hash(mine) == config_hash(explorer_cfg(*DESIGN, *chosen.overrides(2)))
    assert config_hash(mine) != config_hash(compose(base, FLIPPING))  # red: fixed is another


def test_a_scenario_with_a_chosen_timing_replays_exactly():
    base = explorer_cfg(*DESIGN)
    runner = Runner(compose(base, replace(FLIPPING, faults=Faults(timing="choice"))))
    fixed = Runner(compose(base, FLIPPING))
    seeds = range(6)
    runs = [runner.run(RandomStrategy(s)) for s in seeds]
    assert {r.verdict for r in runs} == {"served"} and len({tuple(r.choices) for r in runs}) > 1
    for r in runs:
        again = runner.run(ReplayStrategy(r.choices))
        assert again.row == r.row and again.choices == r.choices and again.counters == r.counters
    # red arm: the same choices under the fixed timing are another run (no daemon to pick)
    assert {fixed.run(ReplayStrategy(r.choices)).verdict for r in runs} == {"mismatch"}
