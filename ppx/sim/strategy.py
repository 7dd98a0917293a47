"""Strategies: which runnable task goes next at a choice point (after shuttle's schedulers).

- `random`: uniform among the runnable tasks, from a seeded generator.
- `pct`: probabilistic concurrency testing. Tasks get distinct random priorities; the highest
  runnable one goes; at d - 1 random change points the running task drops below every other.
  A bug that needs d ordering constraints is found with probability >= 1 / (n k^(d-1)).
- `dfs`: bounded exhaustive search with sleep-set reduction and a delay bound (dfs.py).
- `exhaustive`: every interleaving, no bound, sleep sets and state caching (exhaustive.py).
- `portfolio`: several of the above side by side, schedule i run by member i mod M.
- `replay`: the choices of a saved schedule; a different choice point is a mismatch.
"""

from __future__ import annotations

import random as _random
from abc import ABC, abstractmethod
from typing import ClassVar

from ppx.sim.scheduler import ReplayMismatch


class Strategy(ABC):
    """What the scheduler asks of every strategy. `choose` picks the next task among the
    runnable ones at a choice point (None: cut the run here, an order already covered).
    A strategy that `watches_steps` is asked at every step, even where one task can run,
    every step's footprint is recorded, and `after_step` is told each one (the tree walks:
    dfs.py, exhaustive.py)."""

    watches_steps: ClassVar[bool] = False

    @abstractmethod
    def choose(self, ready: list[int], point: int, sched) -> int | None: ...

    def after_step(self, tid: int, footprint: dict) -> None:  # noqa: B027 - optional hook
        """The step task `tid` just ran touched `footprint` (only when watches_steps)."""


def pct_depth(depth: int, cycle: bool, index: int) -> int:
    """The bug depth of PCT schedule `index`: d itself, or cycled through 1..d (the depth
    of the bug is unknown; each depth gets every d-th schedule, and PCT's guarantee for a
    depth-k bug holds on the schedules run at depth k)."""
    return 1 + index % depth if cycle else depth


class RandomStrategy(Strategy):
    def __init__(self, seed: int) -> None:
        self.rng = _random.Random(seed)

    def choose(self, ready: list[int], point: int, sched) -> int:
        return ready[self.rng.randrange(len(ready))]


class PctStrategy(Strategy):
    def __init__(self, seed: int, depth: int, num_tasks: int, horizon: int) -> None:
        rng = _random.Random(seed)
        # initial priorities are all above d, so a change point (priority < d) sinks a task
        order = list(range(num_tasks))
        rng.shuffle(order)
        self.prio = {tid: depth + i for i, tid in enumerate(order)}
        points = rng.sample(range(1, max(horizon, depth) + 1), max(depth - 1, 0))
        self.change = {p: depth - 1 - i for i, p in enumerate(sorted(points))}

    def choose(self, ready: list[int], point: int, sched) -> int:
        tid = max(ready, key=lambda t: self.prio.get(t, 0))
        low = self.change.get(point)
        if low is not None:  # a change point: the task about to run sinks below all others
            self.prio[tid] = low
            tid = max(ready, key=lambda t: self.prio.get(t, 0))
        return tid


class ReplayStrategy(Strategy):
    """Exact replay. With `then` (a fallback strategy) it is a prefix replay instead: the
    recorded choices are followed while they match, then `then` decides -- how a regression
    test keeps driving a found schedule's prefix after the code under it changed."""

    def __init__(self, choices: list[tuple[int, int]], then=None) -> None:
        self.choices, self.then = choices, then
        self.diverged_at: int | None = None

    def choose(self, ready: list[int], point: int, sched) -> int:
        if self.then is not None:
            if self.diverged_at is None:
                try:
                    return self._exact(ready, point, sched)
                except ReplayMismatch:
                    self.diverged_at = point
            return self.then.choose(ready, point, sched)
        return self._exact(ready, point, sched)

    def _exact(self, ready: list[int], point: int, sched) -> int:
        mask = sum(1 << t for t in ready)
        if point >= len(self.choices):
            raise ReplayMismatch(
                f"step {sched.steps}: choice point {point} is past the schedule's end "
                f"({len(self.choices)} recorded)"
            )
        tid, want = self.choices[point]
        if mask != want or tid not in ready:
            raise ReplayMismatch(
                f"step {sched.steps}: choice point {point} has runnable tasks "
                f"{sorted(ready)}, the schedule recorded {_tids(want)} (chose {tid})"
            )
        return tid


def _tids(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]
