"""Livelock as a fair cycle of the state graph, found as such.

The exhaustive walk (exhaustive.py) records per concrete state its abstract digest
(liveness_forms.py: the state without its monotone counters) and its progress (tokens
committed and requests gone so far), and per step the edge to the next state. Here:

1. `fair_cycles` (liveness_graph.py): the lassos of the no-progress cycles of the abstract
   graph, weakly fair where the graph allows.
2. `pump`: the lasso replayed -- the trace, then the lap again and again until the run
   ends by itself (where the engine has a pass-count bound, `livelocked` by it) -- with the
   abstract digest, the counters and the progress read at every lap boundary. Confirmed
   when the lap ran at least twice (`LAPS` boundaries), every boundary has one abstract
   digest and one progress, and the counters moved as a lap that repeats forever moves
   them (`lap_shift`): each by the same amount every lap; every pass id by one amount, a
   multiple of the slot count (the slot of a pass is its id modulo the slots); and within
   each wire, the admission counts and the LRU stamps, no two numbers ever crossing (their
   order and equalities, all the engine reads of them, hold on every later lap too).
   The pumped run's choices are the failure's schedule (replayable as every failure is).
   Where the run leaves the lasso (its lap's task cannot run: the engine's bound stopping a
   rank mid-lap does that), the lowest runnable task goes on, and `Pumped.left` says where.

Time is fair too. On the idle clock (`explore.clock=idle`) virtual time moves only when no
task can run, so a lap in which some task can always run never lets it move. Where an
effect waits on the clock through the whole lap (a host-tier load that lands `prefetch_ms`
after it started: a `ClockArrival` not landed), such a lap is Zeno: it runs forever in no
time. On any clock that moves with the work (real time, the step clock) the effect lands
after finitely many laps and the run leaves the lap, so it is no livelock and is not
confirmed (`clock_waits` reads the pending effects at every lap boundary).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppx.engine.transport.base import ClockArrival
from ppx.sim.fingerprint import reachable
from ppx.sim.fingerprint_forms import locals_of, stack_of
from ppx.sim.liveness_forms import ADMIT, PASS, STAMP, Abstraction, Counter
from ppx.sim.liveness_graph import Lasso
from ppx.sim.strategy import Strategy

LAPS = 3  # lap boundaries a confirmation needs at least: the entry and two laps
MAX_LAPS = 500  # then the lowest runnable task goes (an engine with no pass-count bound)
ORDERED = (ADMIT, STAMP)  # families the engine compares by order and equality only
# (and each wire's: a seq with the receiver's expected one, the consumed count with the seq
# of the last payload sent)


@dataclass
class Pumped:
    confirmed: bool
    why: str  # what failed, when not confirmed
    verdict: str = ""  # the pumped run's own end
    reason: str = ""
    choices: list[tuple[int, int]] = field(default_factory=list)
    laps: int = 0  # lap boundaries read
    left: str = ""  # where the run left the lasso (the lap's task could not run), if it did
    shift: dict[str, list[int]] = field(default_factory=dict)  # family -> its moves per lap
    cycle: list[dict] = field(default_factory=list)  # the lap's states, post-mortem terms
    row: dict | None = None  # the pumped run's row (its end property's key among it)


def progress_of(sched) -> int:
    """Tokens rank 0 committed plus requests the frontend saw leave: grows on progress only.
    Read through the run's progress watch (the simulated supervisor's bound method)."""
    sup = getattr(sched.watch, "__self__", None)
    if sup is None or not hasattr(sup, "driver"):
        return 0
    left = sum(r.outcome is not None for r in sup.driver.records.values())
    return len(sup.out_q.history) + left


def clock_waits(sched) -> list[float]:
    """When the effects pending on the virtual clock land (each `ClockArrival` reachable
    from a task's stack that has not landed), earliest first."""
    frames = [fr for t in sched.tasks if not t.done and t.glet is not None
              for fr in stack_of(t.glet.gr_frame)]  # fmt: skip
    found = reachable(tuple(locals_of(fr) for fr in frames))
    return sorted(o.at for o in found if isinstance(o, ClockArrival) and o.at > sched.now)


class PumpStrategy(Strategy):
    """The lasso's trace, then its lap over and over, reading the lap boundaries."""

    watches_steps = True

    def __init__(self, lasso: Lasso, abstraction: Abstraction, describe) -> None:
        self.prefix = [t for t, _ in lasso.prefix]
        self.lap = [t for t, _ in lasso.lap]
        self.ab, self.describe = abstraction, describe
        self.k = 0
        self.marks: list[tuple[bytes, tuple[Counter, ...], int]] = []  # digest, counters, progress
        # per boundary on the idle clock: the time, and the first effect pending on it
        self.clock: list[tuple[float, float | None]] = []
        self.cycle: list[dict] = []
        self.off: str | None = None  # the step where the lasso could not be followed

    def choose(self, ready: list[int], point: int, sched) -> int | None:
        k, self.k = self.k, self.k + 1
        if k < len(self.prefix):
            return self._take(self.prefix[k], ready, k)
        i = k - len(self.prefix)
        if i // len(self.lap) >= MAX_LAPS or self.off is not None:
            return ready[0]
        if i % len(self.lap) == 0:
            d, counters = self.ab.of(sched)
            self.marks.append((d, counters, progress_of(sched)))
            if sched.idle_clock:
                waits = clock_waits(sched)
                self.clock.append((sched.now, waits[0] if waits else None))
        if len(self.marks) == 1:  # the first lap: its states, in the post-mortem's terms
            self.cycle.append(self.describe(sched))
        return self._take(self.lap[i % len(self.lap)], ready, k)

    def _take(self, tid: int, ready: list[int], k: int) -> int:
        if tid in ready:
            return tid
        self.off = f"step {k}: the lasso runs task {tid}, runnable are {ready}"
        return ready[0]


def pump(runner, lasso: Lasso, abstraction: Abstraction, describe) -> Pumped:
    """Replay the lasso and check it is a livelock (the module docstring)."""
    s = PumpStrategy(lasso, abstraction, describe)
    res = runner.run(s)
    got = Pumped(False, "", cycle=s.cycle, laps=len(s.marks), left=s.off or "")
    if res is not None:
        got.verdict, got.reason, got.choices = res.verdict, res.row["reason"], res.choices
        got.row = res.row
    marks = s.marks
    slots = {t["num_slots"] for st in s.cycle[:1] for t in st["tasks"] if "num_slots" in t}
    if s.off is not None and len(marks) < LAPS:
        got.why = s.off
    elif len(marks) < LAPS:
        got.why = f"the run ended after {len(marks)} lap boundaries"
    elif len({d for d, _, _ in marks}) > 1:
        got.why = "the abstract state did not repeat"
    elif len({p for _, _, p in marks}) > 1:
        got.why = "a token was committed or a request left in the lap"
    elif len({tuple(f for f, _ in c) for _, c, _ in marks}) > 1:
        got.why = "the counters changed shape"
    elif not lasso.fair:
        got.why = "the lap starves a task that is runnable throughout (not weakly fair)"
    elif (zeno := _zeno(s.clock)) is not None:
        got.why = zeno
    else:
        got.shift, why = lap_shift([c for _, c, _ in marks], slots)
        got.confirmed, got.why = why is None, why or ""
    return got


def _zeno(clock: list[tuple[float, float | None]]) -> str | None:
    """Why the laps are Zeno (the module docstring), or None: the idle clock did not move
    across them while an effect waited on it at every boundary."""
    if not clock or len({now for now, _ in clock}) > 1 or any(w is None for _, w in clock):
        return None
    now, first = clock[0]
    return (f"Zeno: the idle clock stays at {now:.3f} s through every lap while an effect "
            f"waits on it (lands at {first:.3f} s); a clock that moves with the work lands "
            "it, and the run leaves the lap")  # fmt: skip


def lap_shift(laps: list[tuple[Counter, ...]], slots: set[int]) -> tuple[dict, str | None]:
    """The counters' move per lap, by family, and what makes the lap not repeat forever
    (None: nothing). `laps`: the counters at each lap boundary, in one order."""
    first = laps[0]
    move = [b - a for (_, a), (_, b) in zip(first, laps[1], strict=True)]
    for prev, nxt in zip(laps[1:], laps[2:], strict=False):
        if [b - a for (_, a), (_, b) in zip(prev, nxt, strict=True)] != move:
            return {}, "the counters did not move by the same amount every lap"
    families: dict[str, list[int]] = {}
    for (family, _), m in zip(first, move, strict=True):
        families.setdefault(family, []).append(m)
    shift = {f: sorted(set(m)) for f, m in sorted(families.items()) if any(m)}
    if len(shift.get(PASS, ())) > 1:  # a pass id is also read as a distance (flip timing)
        return shift, f"the pass ids moved apart ({shift[PASS]} a lap)"
    for n in slots:
        if shift.get(PASS) and shift[PASS][0] % n:
            return shift, f"a lap of {shift[PASS][0]} passes changes the slot of the next ({n})"
    for family in shift:
        if family in ORDERED or family.startswith("wire "):
            at = [(v, m) for (f, v), m in zip(first, move, strict=True) if f == family]
            if _crossing(at):
                return shift, f"two {family} numbers cross on a later lap"
    return shift, None


def _crossing(at: list[tuple[int, int]]) -> bool:
    """Do two numbers v + n * m (n = 0, 1, ...) ever swap order or stop being equal?"""
    for i, (v, m) in enumerate(at):
        for w, k in at[i + 1 :]:
            gap, closing = v - w, m - k
            if closing and (gap == 0 or (gap > 0) != (closing > 0)):
                return True
    return False
