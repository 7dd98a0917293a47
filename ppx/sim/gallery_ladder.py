"""A gallery cell up a ladder of bounds: from the smallest (requests, max_new) to the cell's
own load, one exhaustive walk per rung (exhaustive_run.py, used as is).

A red climbs until refuted. First it probes the ladder bottom up: at each rung the walk's
first schedule alone, with no fingerprints (`explore.exhaustive.cache=false`, one schedule).
A plain run costs the engine's steps only, while the cached walk digests every step of it
(on a long first run, two orders of magnitude more: docs/simulation.md), and most reds fail
on that run at their own load. The lowest rung whose probe fails is refuted, whatever the walks have
time for. Then the walks, bottom up to that rung (or to the top when no probe failed), each
with a share of the budget left (what is left over the rungs left to walk, so the last gets
at least as much as any below it, and all a fast rung leaves): a walk that fails below the
probe's rung refutes there. The row says whether the refuting walk was exhausted (its trace
the shortest of all, by breadth-first search over the whole graph) or not (the shortest it
found in the budget, or the probe's own run when the walk found none).

A green climbs while verified, each walk with all the budget left: the row names the
largest bound verified and the bound where the budget ran out (or the refuting one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

# requests at rung i are STEPS[i + 1], max_new STEPS[i] (each capped at the cell's own):
# (2, 1), (3, 2), (4, 3), (6, 4), (8, 6), (12, 8), (16, 12), (24, 16), ...
STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


@dataclass(frozen=True)
class Rung:
    requests: int
    max_new: int
    # the top rung's other settings as the study has them (`key`, `value`), marked `+`
    restored: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return f"{self.requests}x{self.max_new}{'+' if self.restored else ''}"

    def overrides(self) -> list[str]:
        return [f"workload.num_requests={self.requests}", f"workload.max_new={self.max_new}",
                *(f"{k}={v}" for k, v in self.restored)]  # fmt: skip


@dataclass
class Walk:
    """One exhaustive walk (or probe) at one rung: exhaustive_run.counts, and its wall."""

    rung: Rung
    verdict: str  # verified | refuted | unknown
    exhausted: bool
    states: int | None
    transitions: int | None
    wall_s: float
    trace_len: int | None
    failure: str  # the failure key of the shortest trace ("" when none)
    probe: bool = False  # the plain first schedule alone (no cache)

    @property
    def mark(self) -> str:
        if self.probe:  # one schedule: it served (s) or failed (f), it verifies nothing
            return "f" if self.verdict == "refuted" else "s"
        return {"verified": "V", "refuted": "R", "unknown": "?"}[self.verdict]


@dataclass
class Climb:
    """A cell's ladder: every walk it ran, and the rung each answer is at."""

    arm: str
    own: Rung
    walks: list[Walk] = field(default_factory=list)
    wall_s: float = 0.0
    unwalked: Rung | None = None  # the first rung the budget left no time to walk

    @property
    def refuted(self) -> Walk | None:
        """The refuting rung's walk (its probe's run when the walk found no failure)."""
        walks = [w for w in self.walks if not w.probe and w.verdict == "refuted"]
        probes = [w for w in self.walks if w.probe and w.verdict == "refuted"]
        return walks[0] if walks else probes[0] if probes else None

    @property
    def verified(self) -> Walk | None:
        """The largest rung verified."""
        return next((w for w in reversed(self.walks) if w.verdict == "verified"), None)

    @property
    def stopped(self) -> Rung | None:
        """Where the budget ran out: the last walk's rung when it ended `unknown`, else the
        rung it left no time to walk."""
        last = [w for w in self.walks if not w.probe]
        return last[-1].rung if last and last[-1].verdict == "unknown" else self.unwalked

    @property
    def deciding(self) -> Walk | None:
        """The walk the row's counts are of: the refuting one, else the last one walked."""
        last = [w for w in self.walks if not w.probe]
        return self.refuted or (last[-1] if last else None)

    @property
    def verdict(self) -> str:
        if self.refuted is not None:
            return "refuted"
        top = self.verified
        return "verified" if top is not None and top.rung == self.own else "unknown"

    @property
    def ladder(self) -> str:
        """Each rung walked and its answers: `2x1:sV 3x2:s? 4x3:fR` (a red's probe first; `-`
        the rung the budget left no time to walk)."""
        marks: dict[Rung, str] = {}
        for w in self.walks:
            marks[w.rung] = marks.get(w.rung, "") + w.mark
        if self.unwalked is not None:  # `-`: no time left to walk it
            marks[self.unwalked] = marks.get(self.unwalked, "") + "-"
        return " ".join(f"{r}:{m}" for r, m in marks.items())


def rungs(own: Rung, start: Rung | None = None) -> list[Rung]:
    """The bounds from `start` (2 requests, max_new 1) up to the cell's own load, then that
    load with the study's other settings restored (when it has any)."""
    start = start or Rung(2, 1)
    out: list[Rung] = []
    for i in range(len(STEPS) - 1):
        r = Rung(min(max(STEPS[i + 1], start.requests), own.requests),
                 min(max(STEPS[i], start.max_new), own.max_new))  # fmt: skip
        if not out or r != out[-1]:
            out.append(r)
    bare = Rung(own.requests, own.max_new)
    if out[-1] != bare:
        out.append(bare)
    if own.restored:
        out.append(own)
    return out


def climb(
    arm: str,
    ladder: list[Rung],
    budget_s: float,
    walk: Callable[[Rung, float, bool], Walk],
) -> Climb:
    """Walk `ladder` for one cell (the module docstring); `walk(rung, budget, probe)`."""
    t0 = time.perf_counter()
    out = Climb(arm, ladder[-1])

    def left() -> float:
        return budget_s - (time.perf_counter() - t0)

    if arm == "red":
        # the probes first, up the whole ladder: a plain run is cheap, and the rung whose
        # probe fails is refuted whatever the walks below it have time for
        top = len(ladder) - 1
        for i, rung in enumerate(ladder):
            if left() <= 0:
                break
            out.walks.append(walk(rung, left(), True))
            if out.walks[-1].verdict == "refuted":
                top = i
                break
        for i, rung in enumerate(ladder[: top + 1]):
            if left() <= 0:
                out.unwalked = rung
                break
            # each rung up to the refuted one (or the top) a share of what is left, so the
            # last gets at least as much as any below it, and all that a fast rung leaves
            got = walk(rung, left() if i == top else left() / (top + 1 - i), False)
            out.walks.append(got)
            if got.verdict == "refuted":
                break
    else:
        for rung in ladder:
            if left() <= 0:
                out.unwalked = rung
                break
            got = walk(rung, left(), False)
            out.walks.append(got)
            if got.verdict != "verified":
                break
    out.wall_s = time.perf_counter() - t0
    return out
