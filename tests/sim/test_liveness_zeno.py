"""Time is fair too (ppx/sim/liveness.py): on the idle clock a lap that never lets time move
while an effect waits on the clock (a host-tier load) is Zeno, not a livelock.

On the engine: the #1175 prefetch completion floor green at 4 requests, max_new 3 had a
confirmed fair cycle (trace 1,024 steps, a lap of 4: rank 0 polls loads of 2 ms and 300 ms
that the idle clock never lands) which refuted it; with this check it is rejected as Zeno
(docs/simulation.md, "The gallery against its expectations"; ~150 s of walk, too slow for
a test). Here: the check on the clock readings, and the pending effects read off a
suspended task's stack."""

from __future__ import annotations

from dataclasses import dataclass

import greenlet

from ppx.engine.transport.base import ClockArrival
from ppx.sim.liveness import _zeno, clock_waits


def test_a_still_clock_with_an_effect_waiting_on_it_is_zeno():
    assert _zeno([(0.0, 0.3), (0.0, 0.3), (0.0, 0.3)]).startswith("Zeno: the idle clock")
    # red arms: the clock moved in a lap; a boundary with nothing waiting; no readings
    assert _zeno([(0.0, 0.3), (0.1, 0.3), (0.2, 0.3)]) is None
    assert _zeno([(0.0, 0.3), (0.0, None), (0.0, 0.3)]) is None
    assert _zeno([]) is None


@dataclass
class Task:
    glet: greenlet.greenlet
    done: bool = False


@dataclass
class Sched:
    tasks: list
    now: float = 0.0


def test_the_effects_waiting_on_the_clock_are_read_off_the_tasks_stacks():
    now = [0.0]

    class Host:  # what a rank holds: loads under way
        def __init__(self) -> None:
            self.loading = {"a": ClockArrival(lambda: now[0], 0.3),
                            "b": ClockArrival(lambda: now[0], 0.002)}  # fmt: skip

    def rank() -> None:
        host = Host()  # noqa: F841 (a local of the suspended frame)
        main.switch()

    main = greenlet.getcurrent()
    g = greenlet.greenlet(rank)
    g.switch()  # suspended inside rank(), `host` on its stack
    sched = Sched([Task(g)])
    assert clock_waits(sched) == [0.002, 0.3]
    sched.now = now[0] = 0.1  # the 2 ms load has landed
    assert clock_waits(sched) == [0.3]
    assert clock_waits(Sched([Task(g, done=True)])) == []  # red arm: a finished task holds none
    g.switch()
