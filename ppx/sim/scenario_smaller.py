"""A scenario shrink's last stage: search again, below the best's size, for a smaller
scenario that fails alike.

The greedy pass and Hypothesis's shrinker move from the find a step at a time; where every
neighbour serves or fails otherwise they stop, however small the bug's least scenario is. In
the zoo's seed-2 run (docs/simulation.md) `hold_forever` and `tp_void_no_requeue` stopped at
5 requests, while seeds 0 and 1 found the same failures with 2 and 3 within seconds: their
5-request finds were flips every 4 passes under a 64-token pool, and no one change to 4 or
fewer requests (flip period, new tokens, concurrency, prompts, prefixes) failed alike.

So with the shrink's time left, the search's own draw runs again with at most one request
fewer than the best; a find that fails alike (`same_failure`) becomes the best and is
shrunk greedily in turn, and the capped search goes on from it. It gives up after
`IDLE_ROUNDS` rounds with no smaller find (its only bound when
`explore.shrinker.scenario_s=0`).
"""

from __future__ import annotations

from typing import Any, Protocol

from hypothesis import Phase, reject

from ppx.config import ConfigError
from ppx.sim.scenario import Scenario, scenarios, search
from ppx.sim.scenario_shrink import same_failure


class ScenarioSearch(Protocol):
    """What the capped search reads and moves of scenarios.ScenarioSearch (named here, not
    imported: that module calls this one)."""

    base: Any
    overrides: tuple[str, ...]
    seed0: int
    first: Any  # scenarios.Find: the find, whose failure key is shrunk
    best: Any  # scenarios.Find: the smallest failing scenario so far
    shrink: Any  # scenarios.Shrinking: the shrink's clock and runs

    def run_scenario(self, sc: Scenario, record: bool) -> tuple[dict[str, int], Any]: ...

    def shrink_out_of_time(self) -> bool: ...

    def shrink_greedy(self) -> None: ...


IDLE_ROUNDS = 4  # capped rounds in a row with no smaller find: the search gives up
SEED_OFFSET = 10_000  # the capped rounds' Hypothesis seeds, apart from the search's own


class _Smaller(Exception):
    """A capped round's scenario fails alike and is no larger than the best: the round ends."""


class _Spent(Exception):
    """The shrink's time ran out inside a capped round."""


def search_smaller(s: ScenarioSearch, per_round: int) -> None:
    """Capped rounds of `per_round` scenarios until none is smaller `IDLE_ROUNDS` times in a
    row, the best has one request, or the shrink's time is spent."""
    idle, k = 0, 0
    while idle < IDLE_ROUNDS and not s.shrink_out_of_time():
        assert s.best is not None
        before = s.best
        if before.scenario.load.num_requests <= 1:
            return
        smaller_round(s, before.scenario.load.num_requests - 1, per_round, k)
        k += 1
        if s.best is before:
            idle += 1
        else:  # a smaller find: its own neighbours first, then a round below it
            idle = 0
            s.shrink_greedy()


def smaller_round(s: ScenarioSearch, cap: int, n: int, k: int) -> None:
    """One Hypothesis search of `n` scenarios of at most `cap` requests (generation only:
    the find it ends on is shrunk greedily, not by Hypothesis)."""
    assert s.first is not None
    shrinking = s.first.result.key

    def prop(sc: Scenario) -> None:
        if s.shrink_out_of_time():
            raise _Spent
        try:
            _, find = s.run_scenario(sc, record=False)
        except ConfigError:
            reject()  # a combination the design refuses
        s.shrink.smaller_runs += 1
        assert s.best is not None
        if find is None or not same_failure(find.result.key, shrinking):
            return
        # no larger, not smaller: Hypothesis runs the failing example once more to raise it
        if find.scenario.size() <= s.best.scenario.size():
            s.best = find
            raise _Smaller

    draws = scenarios(s.base, s.overrides, max_requests=cap)
    search(draws, prop, n, s.seed0 + SEED_OFFSET + k, (Phase.generate,), (_Smaller, _Spent))
