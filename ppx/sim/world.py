"""A whole engine run in one process: the simulator's supervisor.

The ranks are tasks running the same `RankLoop` (policies, channels, flip, TP phase) as a
gloo run, over a `SimTransport`; the frontend (the request driver) is one more task, on the
virtual clock. The outcome has the gloo supervisor's shape, so run.py writes the same run
store, post-mortem and W&B run, with `transport: sim` in the choices.
"""

from __future__ import annotations

import io
import json
import os
import time
import traceback

import torch
from omegaconf import OmegaConf

from ppx.core import stop_verdict
from ppx.engine.faults.rank_faults import RunFaults
from ppx.engine.process import write_report
from ppx.engine.rank import RankArgs, serve
from ppx.engine.transport.sim import SimTransport, SimWire
from ppx.frontend.driver import Driver
from ppx.frontend.make import make_workload
from ppx.frontend.workloads import Workload
from ppx.run_tally import RunTally
from ppx.sim.registry import one_run_strategy
from ppx.sim.scheduler import CLOCK, DONE, Scheduler
from ppx.sim.strategy import ReplayStrategy
from ppx.sim.timing import FAULT_TIMINGS, Timing, sim_tasks
from ppx.sim.world_parts import Progress, SimBoard, SimQueue
from ppx.supervisor import METRICS_EVERY_S, first_failure
from ppx.watch import postmortem
from ppx.watch.waitfor import cycle_text, find_cycle, graph


class SimSupervisor:
    """A run on the simulator: every rank and the frontend are tasks of one scheduler. What
    it keeps for run.py is the process supervisor's RunTally (the same metrics, reports and
    outcome), held rather than inherited. `run_dir=None` keeps nothing on disk (the
    explorer's runs): only the outcome."""

    def __init__(
        self,
        cfg,
        run_dir: str | None,
        strategy=None,
        typed=None,
        models: dict | None = None,
        workload: Workload | None = None,
        events: bool = False,
    ) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        # `events` without a run_dir: each rank's event lines kept in memory (`events()`),
        # for an explorer whose end property reads them (ppx/sim/gallery_expect.py)
        self.sinks = {r: io.StringIO() for r in range(int(cfg.pp))} if events else {}
        # what the explorer builds once for all its schedules: the typed config, the models,
        # the workload (request i is a pure function of the config, the seed and i). The
        # settings below are read from the typed config: an omegaconf read costs ~100 times
        # a dataclass attribute's, and this runs once per schedule
        self.typed = typed = typed if typed is not None else OmegaConf.to_object(cfg)
        self.models, self.workload = models, workload
        self.tally = RunTally(int(typed.pp))
        self.strategy = strategy or one_run_strategy(cfg.explore, sim_tasks(cfg))
        self.sched = Scheduler(
            self.strategy,
            float(typed.sim.step_us) * 1e-6,
            int(typed.sim.max_steps),
            float(typed.watch.max_run_s),
            str(typed.explore.clock),
            footprints=self.strategy.watches_steps,
            watch=self._progress_watch,
        )
        self.progress = Progress(float(typed.watch.progress_stall_s))

    @property
    def world(self) -> int:
        """The ranks (pp): read from the tally, which is sized by them."""
        return self.tally.world

    def _progress_watch(self) -> str | None:
        """Requests outstanding and no token committed for watch.progress_stall_s of virtual
        time: `stalled` (rank 0's engine.liveness.stall_passes usually names it first, in passes)."""
        return self.progress.stalled(self.driver, self.sched.now, self._runnable)

    def _runnable(self) -> str:
        return ", ".join(t.name for t in self.sched.runnable()) or "none"

    def runnable_ranks(self) -> set[int]:
        """Ranks whose task could go on now (a stall, a bound, a stop: not a deadlock)."""
        return {t.tid for t in self.sched.runnable() if t.tid < self.world}

    def _frontend(self) -> None:
        sched, d = self.sched, self.driver
        next_sample = 0.0
        ranks = self.sched.tasks[: self.world]
        # what the frontend's wait reads: tokens from rank 0, its own clock, the ranks' ends
        reads = (self.out_q.key, CLOCK, DONE)
        while True:
            d.collect()
            d.pump()  # after collecting: a finished request frees its place in the closed loop
            now = sched.clock()
            if now >= next_sample:
                # metrics only: what it reads of the ranks' boards decides nothing, so it is
                # no footprint (the reduction may reorder the ranks' steps around it)
                self.tally.sample(self.board, now, self.driver)
                next_sample = now + METRICS_EVERY_S
            if d.done:
                d.request_shutdown()
            if d.shutdown_sent and all(t.done for t in ranks):
                return
            wake = d.next_wake()

            def can_go(wake=wake) -> bool:
                return (
                    bool(self.out_q.items)
                    or (wake is not None and sched.now >= wake)
                    or (d.done and not d.shutdown_sent)
                    or (d.shutdown_sent and all(t.done for t in ranks))
                )

            sched.wait_until(can_go, "frontend: waiting for tokens", wake, reads)

    def _rank(self, a: RankArgs) -> None:
        report, _ = serve(a, lambda: SimTransport(self.wire, a.rank), self.board)
        self.tally.reports[a.rank] = report
        write_report(a, report)
        if report["state"] not in ("done", "abandoned"):
            raise RuntimeError(report["state"])  # ends the run: the report says why

    def run(self) -> dict:
        typed = self.typed
        torch.set_num_threads(1)  # one thread runs every rank, as each gloo rank has one
        if self.run_dir:
            os.makedirs(os.path.join(self.run_dir, "ranks"), exist_ok=True)
        self.board = SimBoard(self.sched, self.world)
        self.wire = SimWire(self.sched, self.world, typed.sim, self.board)
        self.in_q, self.out_q = SimQueue(self.sched, "in_q"), SimQueue(self.sched, "out_q")
        wall0 = time.time()
        self.driver = Driver(
            self.workload or make_workload(self.cfg),
            self.in_q,
            self.out_q,
            0.0,
            self.sched.clock,
        )
        for r in range(self.world):
            a = RankArgs(
                r,
                self.world,
                0,
                self.run_dir,
                None,
                typed,
                0.0,
                self.in_q if r == 0 else None,
                self.out_q if r == 0 else None,
                self.models,
                event_sink=self.sinks.get(r),
            )
            self.sched.spawn(f"rank{r}", lambda a=a: self._rank(a))
        front = self.sched.spawn("frontend", self._frontend)
        if FAULT_TIMINGS.of(typed):  # after the ranks and the frontend: their tids stay put
            self.wire.timing = Timing(self.sched)
        kill = RunFaults(typed).kill(self.world)  # faults.kill
        if kill is not None:  # counted from boot: virtual time starts there
            self.sched.kill_at(*kill)
        try:
            end = self.sched.run()
            verdict, reason = self._verdict(end, front)
            self.tally.sample(self.board, self.sched.now, self.driver)
            pm = self._postmortem(verdict) if verdict not in ("served", "pruned") else None
        finally:
            self.sched.close()
        self.driver.finalize()
        return self.tally.outcome(self.board, verdict, reason, pm, 0.0) | {
            "sim": {
                "steps": self.sched.steps,
                "virtual_s": round(self.sched.now, 6),
                "choice_points": len(self.sched.choices),
                "wall_s": round(time.time() - wall0, 3),
            },
        }

    def events(self) -> list[dict]:
        """The ranks' events of a run made with `events=True`, by time (as run.py collects
        them from the rank files)."""
        rows = [json.loads(ln) for s in self.sinks.values() for ln in s.getvalue().splitlines()]
        return sorted(rows, key=lambda e: e["t_s"])

    def _verdict(self, end: str, front) -> tuple[str, str]:
        s = self.sched
        if end == "mismatch":
            return "mismatch", f"replay diverged from its schedule at {s.mismatch}"
        if end == "stalled":
            return "stalled", s.control.stalled or "stalled"
        if end == "pruned":  # the dfs reduction stopped it: an equivalent order was run
            return "pruned", f"every runnable task asleep at step {s.steps}"
        st = self.strategy
        if isinstance(st, ReplayStrategy) and st.then is None and len(s.choices) < len(st.choices):
            return "mismatch", (
                f"replay diverged from its schedule at step {s.steps}: the run ended after "
                f"{len(s.choices)} of its {len(st.choices)} recorded choice points"
            )
        if end == "failed":
            if front.abnormal:
                return "crashed", "frontend task failed"
            failed = [(r, rep) for r, rep in self.tally.reports.items() if rep["state"] != "done"]
            for _r, rep in failed:
                if rep["state"] == "stopped":
                    why = rep.get("stop_reason") or rep["error"]
                    return stop_verdict(why), why
            if failed:
                r, rep = first_failure(failed)
                return "crashed", f"rank{r}: {rep['error'].splitlines()[0]}"
        if end == "deadlock":
            dead = [t.tid for t in s.tasks[: self.world] if t.killed]
            if dead:
                return (
                    "dead_peer",
                    f"rank(s) {dead} gone (killed at {self.cfg.faults.kill.after_s}s)",
                )
            return "wedged", (
                f"no task can run: deadlock found at step {s.steps} (virtual {s.now:.3f}s)"
            )
        if end in ("step_bound", "time_bound"):
            bound = (
                f"sim.max_steps={s.max_steps}"
                if end == "step_bound"
                else (f"watch.max_run_s={self.cfg.watch.max_run_s} (virtual)")
            )
            return "timeout", f"{bound} reached"
        if not self.driver.shutdown_sent:
            return "crashed", "every rank left the loop before shutdown"
        return "served", ""

    def _postmortem(self, verdict: str) -> dict:
        # a rank parked where it can go on is not blocked: its record stays out of the
        # wait-for graph, so a cycle is named only among ranks that can never run again
        runnable = self.runnable_ranks()
        records = [None if r in runnable else self.board.blocked_on(r) for r in range(self.world)]
        cyc = find_cycle(graph(records))
        out = {"cycle": cycle_text(cyc), "blocked_on": records}
        if not self.run_dir:
            return out
        out = postmortem.write(
            self.run_dir, self.board, [], verdict, 0, 0.0, capture=False, runnable=runnable
        )
        self._stacks(os.path.join(self.run_dir, "postmortem", "stacks"))
        return out

    def _stacks(self, stacks_dir: str) -> None:
        """Every parked task's Python stack, and what the simulator says it waits for."""
        for t in self.sched.tasks:
            frame = self.sched.stack(t)
            with open(os.path.join(stacks_dir, f"{t.name}.txt"), "w") as f:
                f.write(f"# {t.name}: {'done' if t.done else 'waits: ' + t.label}\n")
                if frame is not None and not t.done:
                    f.write("".join(traceback.format_stack(frame)))
