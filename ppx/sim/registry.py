"""The explorer's two switches, one line per value: `explore.strategy` and `explore.reduce`.

Validation refuses a value that names no entry here with one line, as the protocol registry
does (`refusal`); everything else asks the entry what it means (`strategy_of`, `members_of`,
`reduction_of`) instead of comparing the switch with a string.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ppx.sim.strategy import PctStrategy, RandomStrategy, ReplayStrategy, Strategy, pct_depth

# (explore config, the member's k-th schedule, seed, tasks, horizon) -> that schedule's strategy
Draw = Callable[[Any, int, int, int, int], Strategy]


def _random(x, k: int, seed: int, tasks: int, horizon: int) -> Strategy:
    return RandomStrategy(seed)


def _pct(x, k: int, seed: int, tasks: int, horizon: int) -> Strategy:
    return PctStrategy(
        seed, pct_depth(int(x.pct.depth), bool(x.pct.depth_cycle), k), tasks, horizon
    )


def _one_pct(x, tasks: int) -> Strategy:  # a single run has no calibration: a long horizon
    return PctStrategy(int(x.seed), int(x.pct.depth), tasks, int(x.pct.horizon) or 20000)


def _one_random(x, tasks: int) -> Strategy:
    return RandomStrategy(int(x.seed))


def _one_replay(x, tasks: int) -> Strategy:
    from ppx.sim.schedule import load

    return ReplayStrategy(load(x.replay).choices)


@dataclass(frozen=True)
class StrategyKind:
    """One value of `explore.strategy`."""

    name: str
    about: str
    member: bool = False  # may be one of a portfolio's members
    walk: bool = False  # a tree walk (dfs.py): needs a bound, `explore.reduce` applies
    portfolio: bool = False  # runs the members of `explore.portfolio`, side by side
    exhaustive: bool = False  # one walk to exhaustion, on one process (exhaustive_run.py)
    explores: bool = True  # False: a single run's strategy (`python -m ppx.run`) only
    draw: Draw | None = None  # a seeded member: schedule i's own strategy (shard.py)
    calibrates: bool = False  # draws over a horizon measured on one calibration run
    # the strategy of a single run (`python -m ppx.run engine.transport=sim`)
    one_run: Callable[[Any, int], Strategy] = _one_random


@dataclass(frozen=True)
class Reduction:
    """One value of `explore.reduce`."""

    name: str
    about: str
    sleep: bool  # sleep sets over step footprints (dfs.py)


STRATEGIES: dict[str, StrategyKind] = {
    k.name: k
    for k in (
        StrategyKind(
            "random", "uniform among the runnable tasks, seeded", member=True, draw=_random
        ),
        StrategyKind(
            "pct",
            "probabilistic concurrency testing (priorities, change points)",
            member=True,
            draw=_pct,
            calibrates=True,
            one_run=_one_pct,
        ),
        StrategyKind(
            "dfs", "bounded tree walk with a delay bound (dfs.py)", member=True, walk=True
        ),
        StrategyKind(
            "portfolio",
            "the members of explore.portfolio, schedule i by member i mod M",
            portfolio=True,
        ),
        StrategyKind(
            "replay", "the choices of a saved schedule", explores=False, one_run=_one_replay
        ),
        StrategyKind(
            "exhaustive", "every interleaving, no bound, state caching", walk=True, exhaustive=True
        ),
    )
}
REDUCTIONS: dict[str, Reduction] = {
    r.name: r
    for r in (
        Reduction("sleep", "sleep sets over step footprints", sleep=True),
        Reduction("none", "every order of every step", sleep=False),
    )
}


def refusal(x: Any) -> str | None:
    """The first of the two switches (or a portfolio member) that names no entry: one
    line naming it and what it may be. None when both are known."""
    if x.strategy not in STRATEGIES:
        return f"explore.strategy={x.strategy!r}: {' | '.join(STRATEGIES)}"
    if x.reduce not in REDUCTIONS:
        return f"explore.reduce={x.reduce!r}: {' | '.join(REDUCTIONS)}"
    if STRATEGIES[x.strategy].portfolio:
        members = list(x.portfolio)
        if not members or any(m not in STRATEGIES or not STRATEGIES[m].member for m in members):
            names = " | ".join(k.name for k in STRATEGIES.values() if k.member)
            return f"explore.portfolio={members}: a non-empty list of {names}"
    return None


def strategy_of(x: Any) -> StrategyKind:
    return STRATEGIES[str(x.strategy)]


def members_of(x: Any) -> list[StrategyKind]:
    """The strategies that run schedules: a portfolio's members, else the strategy itself."""
    kind = strategy_of(x)
    return [STRATEGIES[str(m)] for m in x.portfolio] if kind.portfolio else [kind]


def reduction_of(x: Any) -> Reduction:
    return REDUCTIONS[str(x.reduce)]


def one_run_strategy(x: Any, tasks: int) -> Strategy:
    """The strategy of one simulated run: a replay file's choices, else the strategy's own."""
    return _one_replay(x, tasks) if x.replay else strategy_of(x).one_run(x, tasks)
