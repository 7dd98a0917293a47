"""The deterministic scheduler: tasks (rank loops, the frontend) advanced one operation at a
time, the next task chosen by a strategy.

Each task is a greenlet (a coroutine with its own stack, so the engine's ordinary blocking
code runs unchanged): a task switches back to the scheduler at every scheduling point (every
operation that can block, every sleep) with the condition under which it can go on, and the
scheduler switches into one of the tasks whose condition holds. Exactly one task runs at a
time, in one OS thread, so a run is a sequence of choices and the same choices give the same
run. (Greenlets rather than threads: a switch costs about a microsecond, a thread hand-over
tens of microseconds, and a run makes one per step.)

A step is what one task does between two scheduling points. With `footprints` on, every step
records the shared objects it touched (a wire queue, the k-th collective, a frontend queue,
the clock; reads and writes): that is what the dfs reduction (dpor.py) compares to tell
steps that commute from steps that race.

Time is virtual. `clock="step"`: it advances by `step_s` per step, and jumps to the next
wake-up (a sleep, a kill) when no task can run; every step then writes the clock, so a step
that reads it depends on every other. `clock="idle"`: it moves only when no task can run,
so reading it commutes with every task's step. No task runnable, none sleeping and work
unfinished is a deadlock, found at once, without a stall timer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import greenlet
import torch

from ppx.engine.transport.base import Abandoned as TaskKilled  # unwinds a parked task
from ppx.switch import Switch

CLOCK = ("clock",)
DONE = ("done",)  # a task ended (the frontend's shutdown condition reads it)


@dataclass(frozen=True)
class Clock:
    # `idle`: virtual time moves only when no task can run (a wait's timeout is the only way
    # time passes); `step`: every step costs sim.step_us
    idle: bool


CLOCKS: Switch[Clock] = Switch(
    "explore.clock", {"step": Clock(idle=False), "idle": Clock(idle=True)}
)
READ, WRITE, ADVANCE = 0, 1, 2  # how a step used a shared object (footprint modes)
WATCH_EVERY = 1024  # steps between two looks of the progress watch


class ReplayMismatch(Exception):
    """A replayed schedule met a choice point other than the one it recorded."""


@dataclass
class Task:
    tid: int
    name: str
    fn: Callable[[], None]
    pred: Callable[[], bool] | None = None  # None: runnable at once
    wake_at: float | None = None  # a sleep's deadline (virtual seconds)
    label: str = ""  # what it waits for, for the post-mortem
    reads: tuple = ()  # the shared objects `pred` reads (the step after the wait starts there)
    done: bool = False
    abnormal: bool = False  # left through a stop or an error: the run ends now
    killed: bool = False  # faults.kill.rank: parked for good
    daemon: bool = False  # not work: the run is done without it (ppx/sim/timing.py)
    glet: greenlet.greenlet | None = None


@dataclass
class Control:
    """Where control is: the scheduler's own greenlet, the task running now, and whether the
    run is ending (every task unwinds), a task failed abnormally, or the watch stalled it."""

    main: greenlet.greenlet | None = None
    current: Task | None = None
    ending: bool = False
    abnormal: bool = False
    stalled: str | None = None  # the progress watch's reason, when it ended the run


class Scheduler:
    # the footprint key of the virtual clock, for what a wait reads (the simulated wire takes
    # it from here, so the engine never imports the simulator)
    clock_key = CLOCK

    def __init__(
        self,
        strategy,
        step_s: float,
        max_steps: int,
        max_time_s: float,
        clock: str = "step",
        footprints: bool = False,
        watch: Callable[[], str | None] | None = None,
    ) -> None:
        self.strategy = strategy
        self.step_s, self.max_steps, self.max_time_s = step_s, max_steps, max_time_s
        self.idle_clock = CLOCKS.get(clock).idle
        self.footprints = footprints
        self.now = 0.0
        self.steps = 0
        self.tasks: list[Task] = []
        self.kills: dict[int, float] = {}  # tid -> virtual time of its death
        self.choices: list[tuple[int, int]] = []  # (chosen tid, ready mask) where >1 could run
        self.mismatch: str | None = None
        self.fp: dict | None = None  # the running step's footprint: key -> written
        self.control = Control()
        # the run's progress watch: called when the clock jumps and every WATCH_EVERY steps,
        # it names a stall (requests outstanding, no token for a while of virtual time)
        self.watch = watch

    # -- building a run ----------------------------------------------------------------------
    def spawn(self, name: str, fn: Callable[[], None], daemon: bool = False) -> Task:
        t = Task(len(self.tasks), name, fn, daemon=daemon)
        t.glet = greenlet.greenlet(lambda: self._body(t))
        self.tasks.append(t)
        return t

    def kill_at(self, tid: int, at_s: float) -> None:
        self.kills[tid] = at_s

    def _body(self, t: Task) -> None:
        try:
            t.fn()
        except TaskKilled:
            pass
        except BaseException:  # noqa: BLE001 - the task's owner records why; we only end
            t.abnormal = self.control.abnormal = True
        finally:
            t.done = True
            self.touch(DONE, True)

    # -- called from inside a task --------------------------------------------------------
    @property
    def current(self) -> Task:
        assert self.control.current is not None, "a scheduling point outside a simulated task"
        return self.control.current

    @property
    def running_tid(self) -> int | None:
        return self.control.current.tid if self.control.current is not None else None

    def touch(self, key: tuple, write: int) -> None:
        """The running step used a shared object (only recorded with footprints on):
        READ or WRITE (a bool), or ADVANCE (the clock: advances commute with each other)."""
        fp = self.fp
        if fp is not None:
            mode = int(write)
            old = fp.get(key, mode)
            fp[key] = mode if old == mode else WRITE  # read and written: a write

    def clock(self) -> float:
        """The virtual time, read by a task (a footprint read of the clock)."""
        if self.fp is not None:
            self.touch(CLOCK, False)
        return self.now

    def wait_until(
        self,
        pred: Callable[[], bool] | None,
        label: str,
        wake_at: float | None = None,
        reads: tuple = (),
    ) -> None:
        """Give the baton back; resume once `pred` holds and the strategy picks this task.
        `reads`: the footprint keys `pred` depends on (what the resumed step starts from)."""
        t = self.current
        if self.control.ending or t.killed:
            raise TaskKilled
        if self.fp is not None:
            # parking is an observation: this step saw the condition false (a peer's step
            # that would have made it true runs differently before or after this one)
            for key in reads:
                self.touch(key, READ)
        t.pred, t.label, t.wake_at, t.reads = pred, label, wake_at, reads
        self.control.main.switch()
        if self.control.ending or t.killed:
            raise TaskKilled
        t.pred, t.label, t.wake_at, t.reads = None, "", None, ()

    def point(self, label: str) -> None:
        """A scheduling point where this task could go on at once."""
        self.wait_until(None, label)

    def sleep(self, seconds: float, label: str = "sleep") -> None:
        wake = self.clock() + max(seconds, 0.0)
        self.wait_until(lambda: self.now >= wake, label, wake, (CLOCK,))

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> str:
        """Advance until every task is done ("done"), a task left abnormally ("failed"), no
        task can ever run again ("deadlock"), the progress watch names a stall ("stalled"),
        a bound is hit ("step_bound" / "time_bound"),
        a replay meets another choice point than recorded ("mismatch"), or the strategy
        declines every runnable task ("pruned": the dfs reduction knows the rest)."""
        self.control.main = greenlet.getcurrent()
        # torch keeps grad / inference mode in thread-local state, and every task shares
        # this thread: a task's `with inference_mode()` would leak into the task it switches
        # to. Holding inference mode around the whole run makes every task's enter/exit a
        # no-op (the engine never needs autograd).
        with torch.inference_mode():
            return self._run()

    def _live(self) -> list[Task]:
        for tid, at in self.kills.items():
            if self.now >= at and not self.tasks[tid].done:
                self.tasks[tid].killed = True
        return [t for t in self.tasks if not t.done and not t.killed]

    def _run(self) -> str:
        # a strategy that watches every step (the dfs reduction) may also refuse to go on
        strategy, idle = self.strategy, self.idle_clock
        every = strategy.watches_steps
        live = self._live()
        while True:
            if self.kills:
                live = self._live()
            if self.control.abnormal:
                return "failed"
            if all(t.daemon for t in live):
                return "done"
            ready = [t for t in live if t.pred is None or t.pred()]
            if not ready:
                wakes = [t.wake_at for t in live if t.wake_at is not None]
                wakes += [at for tid, at in self.kills.items() if not self.tasks[tid].killed]
                future = [w for w in wakes if w > self.now]
                if not future:
                    return "deadlock"
                self.now = min(future)
                if self._watch_says_stalled():
                    return "stalled"
                continue
            if self.steps % WATCH_EVERY == 0 and self._watch_says_stalled():
                return "stalled"
            if self.steps >= self.max_steps:
                return "step_bound"
            if self.now > self.max_time_s:
                return "time_bound"
            if len(ready) == 1 and not every:
                t = ready[0]
            else:
                tids = [r.tid for r in ready]
                try:
                    tid = strategy.choose(tids, len(self.choices), self)
                except ReplayMismatch as e:
                    self.mismatch = str(e)
                    return "mismatch"
                if tid is None:
                    return "pruned"
                if len(ready) > 1:
                    self.choices.append((tid, sum(1 << r for r in tids)))
                t = self.tasks[tid]
            self.steps += 1
            if not idle:
                self.now += self.step_s
            self._step(t)
            if t.done:
                live = self._live()

    def _watch_says_stalled(self) -> bool:
        if self.watch is not None:
            self.control.stalled = self.watch()
        return self.control.stalled is not None

    def _step(self, t: Task) -> None:
        if self.footprints:
            self.fp = dict.fromkeys(t.reads, READ)
            if not self.idle_clock:
                # this step moved the clock: it races with every step that reads it, not
                # with another step that only moves it (advances commute)
                self.touch(CLOCK, ADVANCE)
        self.control.current = t
        t.glet.switch()
        self.control.current = None
        if self.fp is not None:
            fp, self.fp = self.fp, None
            self.strategy.after_step(t.tid, fp)

    def runnable(self) -> list[Task]:
        """The tasks that could go on now (neither done nor killed, condition holding)."""
        return [
            t for t in self.tasks if not t.done and not t.killed and (t.pred is None or t.pred())
        ]

    def blocked(self) -> dict[int, str]:
        """What each parked task waits for (the simulator's own blocked-on record)."""
        return {t.tid: t.label for t in self.tasks if not t.done and not t.daemon}

    def close(self) -> None:
        """Unwind every parked task (TaskKilled inside it, so its `finally` blocks run):
        nothing of the run is left suspended."""
        self.control.ending = True
        for t in self.tasks:
            if not t.done and t.glet is not None and t.glet:
                t.glet.throw(TaskKilled)

    def stack(self, t: Task):
        """The Python frame a parked task is suspended in (for the post-mortem)."""
        return t.glet.gr_frame if t.glet is not None and not t.done else None
