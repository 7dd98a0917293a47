"""A fault's timing as a choice point (faults.timing=choice, ppx/sim/timing.py).

The race: a rank looks at a host-tier load three times in one pass ("is this prefix here
yet?") while a peer runs beside it. The load lands between two of its looks only if the
landing falls inside that window. With a fixed delay every schedule meets the landing at
the same place (red: the flip inside the pass is never reached, whatever the seed); with the
landing a choice of the scheduler, random and pct exploration reach it, and reach the other
timings too (green), deterministically under a seed, and a recorded schedule replays it. On
the engine, exhaustive search branches on a delayed send's release."""

from __future__ import annotations

import torch

from ppx.engine.cache.host import HostTier
from ppx.engine.transport.base import ClockArrival
from ppx.sim.scheduler import Scheduler
from ppx.sim.strategy import PctStrategy, RandomStrategy, ReplayStrategy
from ppx.sim.timing import ChosenMoment, Timing

PATH = [1, 2, 3, 4, 5, 6]
LOOKS = 3


def one_pass(strategy, chosen: bool, prefetch_s: float = 0.02):
    """The rank's looks at its load, and the run's choices."""
    sched = Scheduler(strategy, step_s=1e-4, max_steps=1000, max_time_s=10.0)
    pool = [torch.zeros(16, 1, 2)]
    holder: dict = {}

    def rank() -> None:
        host = HostTier(pool, pool, prefetch_s, sched.clock, holder["arrival"])
        host.save(PATH, 2, [0, 1, 2, 3])
        assert host.start_load(PATH, 2, lambda n: list(range(8, 8 + n)))
        looks = []
        for _ in range(LOOKS):
            sched.point("pass step")
            looks.append(host.pending_for(PATH, 2))
        holder["looks"] = tuple(looks)

    def peer() -> None:
        for _ in range(LOOKS):
            sched.point("peer step")

    sched.spawn("rank0", rank)
    sched.spawn("rank1", peer)
    if chosen:
        timing = Timing(sched)  # spawned last, as the simulated world does
        holder["arrival"] = lambda delay_s, label: timing.arrival(label)
    else:
        holder["arrival"] = lambda delay_s, label: ClockArrival(sched.clock, delay_s)
    assert sched.run() == "done"  # the daemon is not work: the run ends with the ranks
    return holder["looks"], list(sched.choices)


def flipped_inside(looks: tuple) -> bool:
    """The readiness changed between two looks of one pass."""
    return looks[0] and not looks[-1]


SEEDS = range(24)


def test_red_a_fixed_landing_never_flips_inside_the_pass():
    for delay in (0.0, 0.02):
        seen = {one_pass(RandomStrategy(s), chosen=False, prefetch_s=delay)[0] for s in SEEDS}
        assert len(seen) == 1 and not flipped_inside(next(iter(seen))), (delay, seen)


def test_green_random_and_pct_reach_the_flip_and_the_other_timings():
    for make in (lambda s: RandomStrategy(s), lambda s: PctStrategy(s, 2, 3, 20)):
        seen = {one_pass(make(s), chosen=True)[0] for s in SEEDS}
        assert any(flipped_inside(x) for x in seen), seen  # the race
        assert (True,) * LOOKS in seen or (False,) * LOOKS in seen, seen  # and not only it


def test_the_chosen_timing_is_deterministic_and_replays():
    first = [one_pass(RandomStrategy(s), chosen=True) for s in SEEDS]
    assert first == [one_pass(RandomStrategy(s), chosen=True) for s in SEEDS]
    looks, choices = next((x, c) for x, c in first if flipped_inside(x))
    assert one_pass(ReplayStrategy(choices), chosen=True)[0] == looks


def test_exhaustive_search_branches_on_a_delayed_release(tmp_path):
    from explore_helpers import explore_in

    base = ["pp=2", "engine/admission=decision", "engine/ordering=decision_first"]
    base += ["workload.num_requests=2", "workload.max_new=1", "explore.clock=idle"]
    base += ["faults.delay.kind=output", "faults.delay.rank=1", "faults.delay.s=0.001"]
    base += ["explore.strategy=exhaustive", "explore.schedules=1000", "explore.shrinker.runs=0"]
    fixed = explore_in(tmp_path / "fixed", *base, "faults.timing=fixed")
    chosen = explore_in(tmp_path / "choice", *base, "faults.timing=choice")
    assert set(fixed.table.verdict) == set(chosen.table.verdict) == {"served"}
    # the release is a choice point exhaustive search walks: more states and steps between
    # them (not more schedules to an end: the cache ends most runs at a state seen before)
    for count in ("states", "transitions"):
        assert chosen.dfs[count] > fixed.dfs[count], count


# -- a moment a pass count names (faults.cache_drop, flip.every_passes): a look is a choice --


def armed_then_looked(strategy, moment: bool) -> tuple[bool, ...]:
    """A rank arms an effect and looks at it at once, then twice more, beside a peer."""
    sched = Scheduler(strategy, step_s=1e-4, max_steps=1000, max_time_s=10.0)
    holder: dict = {}

    def rank() -> None:
        a = timing.moment("drop") if moment else timing.arrival("drop")
        holder["looks"] = tuple(a.landed() for _ in range(LOOKS))

    def peer() -> None:
        for _ in range(LOOKS):
            sched.point("peer step")

    sched.spawn("rank0", rank)
    sched.spawn("rank1", peer)
    timing = Timing(sched)
    assert sched.run() == "done"
    return holder["looks"]


def test_red_an_arrival_looked_at_once_has_never_landed():
    # no scheduling point between arming and the look: the daemon cannot land it there
    seen = {armed_then_looked(RandomStrategy(s), moment=False) for s in SEEDS}
    assert seen == {(False,) * LOOKS}


def test_green_a_moments_look_is_a_choice_so_it_may_land_at_the_first_look():
    seen = {armed_then_looked(RandomStrategy(s), moment=True) for s in SEEDS}
    assert (True,) * LOOKS in seen and any(not x[0] and x[-1] for x in seen), seen
    assert all(sorted(x) == [False] * x.count(False) + [True] * x.count(True) for x in seen)


def test_a_landed_moment_is_no_choice_point():
    import pytest

    sched = Scheduler(RandomStrategy(0), step_s=1e-4, max_steps=1000, max_time_s=10.0)
    m = Timing(sched).moment("drop")
    with pytest.raises(AssertionError, match="scheduling point outside"):
        m.landed()  # pending: the look yields (here outside any task, so it cannot)
    m.fired = True
    assert m.landed()  # landed: read without yielding


def test_the_transports_moment_lands_at_once_unless_the_scheduler_chooses():
    from ppx.engine.transport.base import LANDED, Transport
    from ppx.engine.transport.sim import SimTransport, SimWire

    assert Transport().moment("flip due") is LANDED
    sched = Scheduler(RandomStrategy(0), step_s=1e-4, max_steps=1000, max_time_s=10.0)
    wire = SimWire(sched, 2)
    assert SimTransport(wire, 1).moment("flip due") is LANDED  # faults.timing=fixed
    wire.timing = Timing(sched)
    m = SimTransport(wire, 1).moment("flip due")
    assert isinstance(m, ChosenMoment) and m.label == "rank1 flip due"
    assert list(wire.timing.pending) == [m] and not m.fired


class NeverTheDaemon(RandomStrategy):
    """A strategy that passes the timing daemon over for good (pct can: its lowest priority)."""

    def choose(self, ready, point, sched):
        return min(ready)  # the daemon is spawned last: the highest task id


def test_fairness_a_pending_effect_lands_at_the_bounded_look_even_if_never_picked():
    from ppx.sim.timing import LOOK_BOUND

    sched = Scheduler(NeverTheDaemon(0), step_s=1e-4, max_steps=1000, max_time_s=10.0)
    holder: dict = {}

    def rank() -> None:
        a = timing.arrival("host load")
        looks = []
        for _ in range(LOOK_BOUND + 1):
            sched.point("pass step")
            looks.append(a.landed())
        holder["looks"] = looks

    sched.spawn("rank0", rank)
    timing = Timing(sched)
    assert sched.run() == "done"
    # red: up to the bound the daemon was never picked and nothing landed it
    assert holder["looks"][: LOOK_BOUND - 1] == [False] * (LOOK_BOUND - 1)
    # green: the bound's look lands it, once; the daemon has nothing left to land
    assert holder["looks"][LOOK_BOUND - 1 :] == [True, True]
    assert timing.landed == 1 and not timing.pending
