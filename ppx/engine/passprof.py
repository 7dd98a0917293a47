"""The pass profile: where one pass's time goes on a rank, part by part.

Off by default and absent from the hot path: `PPX_PROFILE=1` in the supervisor's environment
makes each gloo rank wrap the engine's own methods (class attributes, in its own process)
before it builds its loop, and dump per-pass totals to `ranks/rank{r}.profile.json` at exit.
`benchmarks/profile_pass.py` runs the engine this way and prints the table.

Every part is *exclusive* time (a nested wrapped call is charged to its own part, not to its
caller), both wall and thread-CPU: for a part that computes, wall - cpu is time the process
was runnable but descheduled (the OS scheduler's share on an oversubscribed machine); for the
wait parts it is the wait itself. A pass runs from one heartbeat to the next; whatever no
part covers (the loop, dataclass building, unwrapped glue) is `other`.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable

# (part, "module:Class.method" or "module:function") -- the places a pass spends its time
TARGETS = [
    ("chain", "ppx.engine.loop:PassSteps.step_chain"),
    ("schedule", "ppx.engine.loop:PassSteps.step_schedule"),
    ("decision", "ppx.engine.loop:PassSteps.step_decision"),
    ("decision", "ppx.engine.loop:PassSteps.step_lap"),
    ("codec", "ppx.engine.admission.codec:encode"),
    ("codec", "ppx.engine.admission.codec:decode"),
    ("codec", "ppx.engine.codec:encode_requests"),
    ("codec", "ppx.engine.loop:decode_requests"),
    ("inputs", "ppx.engine.scheduler:Scheduler.inputs"),
    ("model", "ppx.engine.model.llama:StageModel.forward"),
    ("launch", "ppx.engine.loop:PassSteps.step_launch"),
    ("send", "ppx.engine.channels:Channels.send"),
    ("header", "ppx.engine.channels:encode_header"),
    ("header", "ppx.engine.channels:decode_header"),
    ("recv", "ppx.engine.channels:Channels.recv"),
    ("recv", "ppx.engine.channels:Channels.try_recv"),
    ("recv_wait", "ppx.engine.transport.gloo:GlooTransport.recv"),
    ("flush_wait", "ppx.engine.channels:Channels.flush"),
    ("output", "ppx.engine.loop:PassSteps.step_output"),
    ("output", "ppx.engine.results:Results.apply"),
    ("board", "ppx.engine.board:RankBoard.block"),
    ("board", "ppx.engine.board:RankBoard.unblock"),
    ("board", "ppx.engine.board:RankBoard.set"),
    ("board", "ppx.engine.board:RankBoard.add"),
    ("board", "ppx.engine.rank:RankLoop.after_pass"),
    ("events", "ppx.telemetry.events:EventLog.emit"),
    ("events", "ppx.engine.loop:PassSteps.log_admits"),
    ("intake", "ppx.engine.intake:Intake.take"),
    ("intake", "ppx.engine.intake:Intake.flush_out"),
]
PARTS = list(dict.fromkeys(p for p, _ in TARGETS)) + ["other"]
WAITS = ("recv_wait", "flush_wait")  # wall - cpu is the wait itself, not the OS scheduler


class PassProfiler:
    def __init__(self) -> None:
        self.stack: list[list] = []  # [part, wall0, cpu0, child_wall, child_cpu]
        self.cur = self._blank()
        self.passes: list[dict] = []
        self.pass_wall0 = self.pass_cpu0 = 0

    @staticmethod
    def _blank() -> dict:
        return {"mode": "none", "wall": {}, "cpu": {}}

    def _enter(self, part: str) -> None:
        self.stack.append([part, time.perf_counter_ns(), time.thread_time_ns(), 0, 0])

    def _exit(self) -> None:
        wall1, cpu1 = time.perf_counter_ns(), time.thread_time_ns()
        part, wall0, cpu0, cw, cc = self.stack.pop()
        wall, cpu = wall1 - wall0, cpu1 - cpu0
        w, c = self.cur["wall"], self.cur["cpu"]
        w[part] = w.get(part, 0) + wall - cw
        c[part] = c.get(part, 0) + cpu - cc
        if self.stack:  # the caller's exclusive time excludes ours
            self.stack[-1][3] += wall
            self.stack[-1][4] += cpu

    def wrap(self, fn: Callable, part: str) -> Callable:
        prof = self

        def timed(*args, **kwargs):
            prof._enter(part)
            try:
                return fn(*args, **kwargs)
            finally:
                prof._exit()

        # only `__wrapped__` (no name or doc copied): the original stays reachable
        return functools.update_wrapper(timed, fn, assigned=(), updated=())

    def beat(self) -> None:
        """A heartbeat starts a pass: close the previous one."""
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        if self.pass_wall0:
            self.cur["pass_wall"] = wall - self.pass_wall0
            self.cur["pass_cpu"] = cpu - self.pass_cpu0
            self.passes.append(self.cur)
        self.cur, self.pass_wall0, self.pass_cpu0 = self._blank(), wall, cpu

    def dump(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"parts": PARTS, "waits": list(WAITS), "passes": self.passes}, f)


def _replace(owner: object, name: str, wrapper: Callable[[Callable], Callable]) -> None:
    """`owner.name` becomes `wrapper(original)`, in this process only (a profiled rank)."""
    setattr(owner, name, wrapper(getattr(owner, name)))


def install() -> PassProfiler:
    """Wrap every target in this process; returns the profiler to dump at exit."""
    import importlib

    prof = PassProfiler()
    for part, target in TARGETS:
        mod_name, _, attr = target.partition(":")
        owner = importlib.import_module(mod_name)
        *path, name = attr.split(".")
        for p in path:
            owner = getattr(owner, p)
        _replace(owner, name, functools.partial(prof.wrap, part=part))

    from ppx.engine.board import RankBoard
    from ppx.engine.loop import PassSteps

    def closing_the_pass(beat: Callable) -> Callable:
        def beat_and_close(self, pass_id: int) -> None:
            prof.beat()
            beat(self, pass_id)

        return beat_and_close

    def noting_the_mode(launch: Callable) -> Callable:
        def launch_and_mode(self, p, step) -> None:
            if p.batch is not None:  # the pass's mode, so the table keeps decode passes apart
                prof.cur["mode"] = "void" if p.batch.voided else p.batch.mode
            launch(self, p, step)

        return launch_and_mode

    _replace(RankBoard, "beat", closing_the_pass)
    _replace(PassSteps, "step_launch", noting_the_mode)
    return prof
