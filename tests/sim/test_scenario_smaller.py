"""The scenario shrink's capped search (ppx/sim/scenario_smaller.py): where no neighbour of
the find fails alike, the search's own draw below the best's requests finds a smaller
scenario of the same failure, which the greedy pass then shrinks in turn."""

from __future__ import annotations

import time

import pytest
from explore_helpers import explorer_cfg, planted_search

from ppx.sim.scenario import Flips, Load, Scenario
from ppx.sim.scenario_shrink import shrink_scenario
from ppx.sim.scenario_smaller import search_smaller

# the find: five requests, a 40-token prefix, flips every 9 passes
FIVE = Scenario(Load(num_requests=5, prefix_len=40, concurrency=5), flips=Flips(every=9))


def _island(c: Scenario) -> bool:
    """A failure at five requests with a 40-token prefix, and at four or fewer with a
    16-token one: no single change to the find reaches the smaller ones."""
    n, prefix = c.load.num_requests, c.load.prefix_len
    return (n == 5 and prefix == 40) or (n <= 4 and prefix == 16)


def _search(other=lambda c: False):
    return planted_search(FIVE, _island, other)


def test_the_capped_search_reaches_what_the_greedy_pass_cannot():
    # red arm: the greedy pass alone stays at five (every neighbour serves)
    best, runs = shrink_scenario(FIVE, _island, lambda: False)
    assert (best.load.num_requests, best.load.prefix_len) == (5, 40) and runs > 0
    s = _search()
    s.shrink_greedy()
    assert s.best.scenario.load.num_requests == 5
    search_smaller(s, 24)
    assert s.best.scenario.load.num_requests == 1 and s.best.scenario.load.prefix_len == 16
    assert s.shrink.smaller_runs > 0 and s.best.result.key == s.first.result.key


def test_a_smaller_scenario_failing_otherwise_is_not_taken():
    s = _search(other=lambda c: c.load.num_requests <= 4)
    search_smaller(s, 24)
    assert s.best.scenario == FIVE  # every smaller one fails, but not as the find does
    assert s.shrink.smaller_runs > 0


def test_the_capped_search_keeps_to_the_shrinks_time():
    s = _search()
    s.shrink_s, s.shrink.t0 = 1.0, time.time() - 2.0  # the shrink's time already spent
    search_smaller(s, 24)
    assert s.best.scenario == FIVE and s.shrink.smaller_runs == 0


@pytest.mark.parametrize("cap", [1, 2])
def test_the_cap_bounds_the_draw(cap):
    """Every draw below a corner's own least (the mid-prefill corner's 2 requests and 2 at
    once, the short pool's 3) is lowered to the cap; at cap 1 the draw once raised
    `InvalidArgument` for the concurrency, and the zoo's explorer exited with it."""
    from hypothesis import given, settings

    from ppx.sim.scenario import scenarios

    base = explorer_cfg("pp=3", "engine/admission=decision", "engine/ordering=decision_first")
    seen: list[tuple[int, int]] = []

    @settings(max_examples=120, database=None, deadline=None)
    @given(scenarios(base, max_requests=cap))
    def draw(sc: Scenario) -> None:
        seen.append((sc.load.num_requests, sc.load.concurrency))

    draw()
    assert {n for n, _ in seen} == set(range(1, cap + 1))
    assert all(1 <= c <= n for n, c in seen)
