"""Shrinking a failing schedule before it is saved (after shuttle's and QuickCheck's).

A task runs until it blocks, so no choice preempts a runnable task: a schedule is the
lowest-runnable-task run plus its deviations, the choice points where it took another task
(each costs delays: the lower runnable tasks it passed over). The shrinker drops deviations
over segments of the schedule, in chunks then one at a time (delta debugging), running every
candidate: a candidate is kept when the run it makes fails with the same failure key and is
no larger in either measure -- delays and choice points -- and smaller in one. (Minimising
delays alone let a schedule grow: 35 -> 58 choice points with 0 delays.) So a shrunk
schedule is never longer than the one found. The schedule kept is the candidate run's own
recorded choices, checked once more by exact replay before it replaces the original.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppx.sim.runner import delays
from ppx.sim.strategy import ReplayStrategy, Strategy


class GuidedStrategy(Strategy):
    """At choice point j, the deviation's task if it is runnable, else the lowest runnable."""

    def __init__(self, deviations: dict[int, int]) -> None:
        self.dev = deviations

    def choose(self, ready: list[int], point: int, sched) -> int:
        tid = self.dev.get(point)
        return tid if tid is not None and tid in ready else ready[0]


def deviations(choices: list[tuple[int, int]]) -> dict[int, int]:
    """The choice points where a schedule did not take the lowest runnable task."""
    return {j: tid for j, (tid, mask) in enumerate(choices) if mask & ((1 << tid) - 1)}


@dataclass
class Shrunk:
    choices: list[tuple[int, int]]
    delays: tuple[int, int]  # before, after
    length: tuple[int, int]  # choice points, before, after
    runs: int  # candidates run (the final replay included)
    replayed: bool  # the shrunk schedule replayed exactly to the same failure
    reason: str  # the shrunk run's own reason (its step counts differ from the original's)


def _size(res) -> tuple[int, int]:
    return delays(res.choices), len(res.choices)


def smaller(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """`a` is no larger than `b` in delays and in choice points, and smaller in one."""
    return a[0] <= b[0] and a[1] <= b[1] and a != b


def shrink(runner, result, budget: int) -> Shrunk:
    """Minimise `result` (a failing Result) with at most `budget` candidate runs."""
    key = result.key
    best, dev = result, deviations(result.choices)
    runs, n = 0, 2
    while dev and runs < budget:
        points = sorted(dev)
        size = max(len(points) // n, 1)
        progressed = False
        for start in range(0, len(points), size):
            if runs >= budget:
                break
            drop = set(points[start : start + size])
            res = runner.run(GuidedStrategy({j: t for j, t in dev.items() if j not in drop}))
            runs += 1
            if res is not None and res.key == key and smaller(_size(res), _size(best)):
                best, dev = res, deviations(res.choices)
                n, progressed = max(n - 1, 2), True
                break
        if not progressed:
            if size == 1:
                break
            n = min(n * 2, len(points))
    replayed = True
    if best is not result:  # the candidate's own choices, replayed exactly, fail alike
        again = runner.run(ReplayStrategy(best.choices))
        runs += 1
        replayed = again is not None and again.key == key
        if not replayed:
            best = result
    return Shrunk(
        best.choices, (result.delays, best.delays), (len(result.choices), len(best.choices)),
        runs, replayed, best.row["reason"],
    )  # fmt: skip
