"""A fault's timing as a choice point (faults.timing=choice).

With `fixed` timing a timed effect lands after its configured delay: a host-tier load
`engine.kv.prefetch_ms` after it started, a slow link's send `faults.delay.s` after it was
issued. Each run then meets the effect at the same point of its schedule, so a race between
the effect and the ranks' steps is reached only if someone picks the one delay that hits it.

With `choice` the scheduler decides. Every timed effect becomes a pending arrival, and one
daemon task lands the pending arrivals, oldest first, one per step; the strategy picks that
task like any other runnable task, so random, pct, dfs and exhaustive search where in the
ranks' steps each effect lands, and a saved schedule replays it (the choice is a task id, as
every other choice). The daemon's step writes the arrival's footprint key and a rank that
asks `landed()` reads it, so the dfs reduction sees the race and never prunes it. The daemon
is not work: a run is done when every other task is, and it is never blocked on.

A pass count names a moment rather than a delay (`faults.cache_drop.after_pass`,
`flip.every_passes`): once the count has run out the rank asks for a moment
(`Transport.moment`), landed at once under fixed timing, a `ChosenMoment` here, and acts at
its first look after the landing. The look is a scheduling point while it is pending, so the
landing can fall just before the pass the config names as well as at any later one.
"""

from __future__ import annotations

from collections import deque

from ppx.sim.scheduler import READ, WRITE
from ppx.switch import Switch

# faults.timing -> does the simulator's scheduler choose when timed effects land?
FAULT_TIMINGS: Switch[bool] = Switch("faults.timing", {"fixed": False, "choice": True})

PENDING = ("arrivals",)  # footprint key: the queue of arrivals not landed yet


def sim_tasks(cfg) -> int:
    """The tasks of one simulated run: the ranks, the frontend and, under choice timing, the
    daemon that lands timed effects (spawned last, so the others keep their task ids)."""
    return int(cfg.pp) + 1 + int(FAULT_TIMINGS.of(cfg))


def polls_the_clock(cfg) -> bool:
    """Does a run of `cfg` poll an effect that lands on the clock? A host tier's load-back
    under fixed timing lands `prefetch_ms` after it started, and a rank learns of it only by
    asking, once a pass (`HostTier.pending_for`): it never parks on it. On the idle clock
    (`explore.clock=idle`, time moves only when no task can run) ranks running passes can
    always run, so such a load never lands while they do, and the runs meet `stalled` ends
    and Zeno laps (liveness.py) where on any clock that moves with the work it would have
    landed. Under choice timing the daemon lands it, on either clock."""
    return bool(cfg.engine.kv.host_tier) and not FAULT_TIMINGS.of(cfg)


# Fairness: a pending effect lands at the latest at the rank's LOOK_BOUND-th look at it. A
# strategy may pass the daemon over for good (pct with the daemon at the lowest priority),
# and ranks that keep passing while a load never lands end `stalled` or `livelocked`, a run
# no real link gives (an effect lands in bounded time). Above the looks one pass's race
# needs, well below engine.liveness.livelock_passes (64).
LOOK_BOUND = 8


class ChosenArrival:
    """One timed effect; lands when the daemon's step that takes it is chosen, or at the
    look that reaches LOOK_BOUND. `looks` is state the run's fingerprint reads (it is
    reachable from the daemon's frame), so a forced landing is no hidden history."""

    def __init__(self, timing: Timing, key: tuple, label: str) -> None:
        self.timing, self.sched, self.key, self.label = timing, timing.sched, key, label
        self.fired = False
        self.looks = 0

    def peek(self) -> bool:
        """Has it landed? Read, not a look: a parked wait's condition (a held send)."""
        self.sched.touch(self.key, READ)
        return self.fired

    def landed(self) -> bool:
        """The rank's look, in its task."""
        self.sched.touch(self.key, READ)
        if not self.fired:
            self.looks += 1
            if self.looks >= LOOK_BOUND:
                self.timing.land(self)
        return self.fired


class ChosenMoment(ChosenArrival):
    """A moment a pass count made due (a cache drop, a flip): the rank looks at it once a
    pass, so each look while it is pending is a scheduling point of its own. The strategy
    may land it just before the look (the pass the config names, as fixed timing does) or
    at any later one; without the point a rank that runs its passes without yielding could
    never meet it at the configured pass."""

    def landed(self) -> bool:
        if not self.fired:
            self.sched.point(f"looks at {self.label}")
        return super().landed()


class Timing:
    """The daemon task of one run: lands pending arrivals, one per step, oldest first."""

    def __init__(self, sched) -> None:
        self.sched = sched
        self.pending: deque[ChosenArrival] = deque()
        self.made = self.landed = 0
        sched.spawn("fault timing", self.run, daemon=True)

    def arrival(self, label: str, kind: type[ChosenArrival] = ChosenArrival) -> ChosenArrival:
        """A timed effect under way (a host-tier load, a delayed send)."""
        a = kind(self, ("arrival", self.made), label)
        self.made += 1
        self.pending.append(a)
        self.sched.touch(PENDING, WRITE)
        return a

    def moment(self, label: str) -> ChosenArrival:
        """A moment a pass count made due (a cache drop, a flip)."""
        return self.arrival(label, ChosenMoment)

    def land(self, a: ChosenArrival) -> None:
        """`a` lands now: the daemon's step, or a look at the bound."""
        self.pending.remove(a)  # the daemon's: the oldest, first in the queue
        a.fired = True
        self.landed += 1
        self.sched.touch(a.key, WRITE)
        self.sched.touch(PENDING, WRITE)

    def run(self) -> None:
        pending = self.pending
        while True:
            self.sched.wait_until(lambda: bool(pending), "fault timing", reads=(PENDING,))
            self.land(pending[0])
