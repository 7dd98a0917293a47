"""The supervisor: spawns the ranks, drives the workload, watches, decides the verdict, tears
down every child on every exit path, checks the tokens and writes the run store."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import socket
import time

from omegaconf import OmegaConf

from ppx.core import CHANNEL_MISMATCH, stop_verdict
from ppx.engine.board import Board, F, State
from ppx.engine.faults.rank_faults import RunFaults
from ppx.engine.process import rank_main
from ppx.engine.rank import RankArgs
from ppx.engine.transport.registry import spec_of as wire_spec
from ppx.frontend.driver import Driver
from ppx.frontend.make import make_workload
from ppx.launch.children import stop_children
from ppx.launch.start_methods import START_METHODS
from ppx.launch.store import spec_of, torchrun_env
from ppx.run_tally import RunTally
from ppx.telemetry.progress import Progress
from ppx.watch import postmortem
from ppx.watch.watchdog import Watchdog

METRICS_EVERY_S = 0.5


def first_failure(crashed: list[tuple[int, dict]]) -> tuple[int, dict]:
    """Of the ranks that failed, the one that failed first (its report's `failed_at`, on the
    run's clock): a peer's `Connection closed by peer` follows the failure it reports."""
    return min(crashed, key=lambda x: (x[1].get("failed_at") is None, x[1].get("failed_at") or 0))


def node_gone(silent: list[int]) -> tuple[str, str]:
    return "dead_peer", f"rank(s) {silent} stopped answering (their node is gone)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Supervisor:
    def __init__(self, cfg, run_dir: str) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.world = int(cfg.pp)
        self.interrupted = False
        self.tally = RunTally(self.world)
        # under torchrun this process is global rank 0's worker: only rank 0 is spawned here,
        # the others are remote handles fed by the store mirror (ppx/launch)
        self.torchrun = torchrun_env()
        self.mirror = None

    def _on_signal(self, signum, frame) -> None:
        self.interrupted = True

    def _spawn(self, typed) -> None:
        # a joblib (loky) worker leaves a global start method its spawned children cannot
        # resolve; the ranks are plain spawn children
        if mp.get_start_method(allow_none=True) not in (None, "spawn", "fork", "forkserver"):
            mp.set_start_method("spawn", force=True)
        method = START_METHODS.of(typed)
        ctx = mp.get_context(method.context)
        if method.from_server:
            # the forkserver imports the engine (torch) once per supervisor process, and every
            # rank is a fork of that clean state: a rank boots in tens of ms instead of a fresh
            # interpreter's seconds. Never `fork` the supervisor itself: it runs threads (queue
            # feeders, W&B), and a fork copies their locks mid-flight.
            ctx.set_forkserver_preload(["ppx.engine.process"])
        self.in_q, self.out_q = ctx.Queue(), ctx.Queue()
        port = free_port()
        self.procs = []
        spec = None
        if self.torchrun is not None:
            from ppx.launch.mirror import Mirror

            spec = spec_of(self.torchrun)
            self.mirror = Mirror(spec, self.board, self.run_dir, local={0})
            self.mirror.start(self.t0)
        for r in range(self.world):
            if self.mirror is not None and r != 0:
                self.procs.append(self.mirror.remote[r - 1])
                continue
            a = RankArgs(
                r,
                self.world,
                port,
                self.run_dir,
                self.board_path,
                typed,
                self.t0,
                self.in_q if r == 0 else None,
                self.out_q if r == 0 else None,
                store=spec,
                env=dict(os.environ) if method.from_server else None,
            )
            p = ctx.Process(target=rank_main, args=(a,), name=f"ppx-rank{r}", daemon=True)
            p.start()
            self.procs.append(p)

    def _await_boot(self, limit_s: float) -> float:
        """Wait until every rank has booted (or one has exited: the loop then says why)."""
        while time.time() - self.t0 < limit_s and not self.interrupted:
            states = [int(self.board.fields(r)[F.STATE]) for r in range(self.world)]
            if all(st != State.INIT for st in states) or any(
                p.exitcode is not None for p in self.procs
            ):
                break
            time.sleep(0.02)
        return round(time.time() - self.t0, 3)

    def _report(self, r: int) -> dict | None:
        if r not in self.tally.reports:
            try:
                with open(os.path.join(self.run_dir, "ranks", f"rank{r}.json")) as f:
                    self.tally.reports[r] = json.load(f)
            except (FileNotFoundError, json.JSONDecodeError):
                return None
        return self.tally.reports[r]

    def _rank_verdict(self) -> tuple[str, str] | None:
        """A rank that left: a named stop or livelock first, then a death without a report (a
        peer's crash on the closed connection is the consequence of either), then a crash."""
        exited = [
            (r, self._report(r), p.exitcode)
            for r, p in enumerate(self.procs)
            if p.exitcode is not None
        ]
        for _r, rep, _ in exited:
            if rep is not None and rep["state"] == "stopped":
                reason = rep["stop_reason"] or rep["error"]
                return stop_verdict(reason), reason
        for r, rep, code in exited:  # killed: its peers' connection errors follow from it
            if rep is None:
                return "dead_peer", f"rank{r} exited with code {code} and no report"
        if self.mirror is not None and exited:  # a node gone: its peers' errors follow from it
            silent = self._silent_remote()
            if silent:
                return node_gone(silent)
        crashed = [(r, rep) for r, rep, _ in exited if rep["state"] == "error"]
        if crashed:
            r, rep = first_failure(crashed)
            return "crashed", f"rank{r}: {rep['error'].splitlines()[0]}"
        if exited and not self.driver.shutdown_sent:
            return "crashed", f"rank{exited[0][0]} left the loop before shutdown"
        return None

    def _silent_remote(self) -> list[int]:
        """Remote ranks that stopped publishing; waits out the mirror's silence window first,
        since a local rank sees a remote node's death on the wire before the mirror does."""
        from ppx.launch.mirror import SILENT_DEAD_S

        deadline = time.time() + SILENT_DEAD_S + 1.0
        while time.time() < deadline:
            gone = self.mirror.silent(0.5)
            if gone or all(p.exitcode is not None for p in self.mirror.remote):
                return [r for r in gone if self._report(r) is None]
            time.sleep(0.1)
        return []

    def _interrupt_verdict(self) -> tuple[str, str]:
        """A signal. Under torchrun the agent that sends it may be reacting to the other
        node's death (its rendezvous lost a member), and it can see that before the mirror
        does: a remote rank gone silent makes the run a dead peer, not an interruption."""
        if self.mirror is not None:
            silent = self._silent_remote()
            if silent:
                return node_gone(silent)
            rv = self._rank_verdict()  # the store itself went with that node
            if rv is not None and rv[0] == "dead_peer":
                return rv
        return "interrupted", "signal received"

    def _sample(self, now: float) -> None:
        self.tally.sample(self.board, now - self.t0, self.driver)

    def run(self) -> dict:
        """Returns the raw outcome; the caller (run.py) writes the store."""
        typed = OmegaConf.to_object(self.cfg)  # the ranks read the config typed
        os.makedirs(os.path.join(self.run_dir, "ranks"), exist_ok=True)
        self.board_path = os.path.join(self.run_dir, "ranks", "board.bin")
        self.board = Board(self.board_path, self.world, create=True)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        self.t0, t0_ns = time.time(), time.monotonic_ns()
        w = self.cfg.watch
        verdict, reason, pm = None, "", None
        try:
            self._spawn(typed)
            self.boot_s = self._await_boot(float(w.max_run_s))
            # the workload clock (duration_s, arrivals) starts when the engine is up
            self.driver = Driver(
                make_workload(self.cfg),
                self.in_q,
                self.out_q,
                time.time(),
            )
            wd = Watchdog(self.board, self.procs, float(w.stall_s))
            prog = Progress(
                float(w.progress_s), None if self.driver.quota.deadline else self.driver.quota.limit
            )
            next_sample = self.t0
            kill = RunFaults(self.cfg).kill(self.world)  # faults.kill: (rank, after_s) or None
            # the run's clocks (a kill, max_run_s) count from boot, as on sim: a slow start on a
            # loaded machine neither eats the run's time nor lands a kill in the middle of it
            booted = time.time()
            kill_at = booted + kill[1] if kill is not None else None
            while verdict is None:
                if kill is not None and kill_at is not None and time.time() >= kill_at:
                    os.kill(self.procs[kill[0]].pid, signal.SIGKILL)  # faults.kill: a rank dies
                    kill_at = None
                self.driver.pump()
                self.driver.collect(timeout=float(w.poll_s))
                now = time.time()
                if now >= next_sample:
                    self._sample(now)
                    next_sample = now + METRICS_EVERY_S
                if self.interrupted:
                    verdict, reason = self._interrupt_verdict()
                    break
                if self.driver.done:
                    self.driver.request_shutdown()
                if all(p.exitcode is not None for p in self.procs) and self.driver.shutdown_sent:
                    rv = self._rank_verdict()
                    verdict, reason = rv or ("served", "")
                    break
                rv = self._rank_verdict()
                if rv:
                    verdict, reason = rv
                    break
                outstanding = not self.driver.done or self.driver.shutdown_sent
                d = self.driver
                v = wd.check(
                    (d.stream.tokens, d.count("served"), d.count("refused"), d.active), outstanding
                )
                if v == "dead_peer":
                    verdict, reason = v, f"rank(s) {wd.dead_ranks()} gone"
                elif v == "mismatch":
                    verdict, reason = v, f"{CHANNEL_MISMATCH}{wd.mismatch}"
                elif v == "wedged":
                    held = min(b["since_s"] for b in wd.blocked() if b)
                    verdict, reason = (
                        v,
                        f"every rank blocked for at least {held:.1f}s with no progress",
                    )
                elif d.active > 0 and wd.tokenless_for > float(w.progress_stall_s):
                    verdict, reason = (
                        "stalled",
                        (
                            f"stalled: requests outstanding and no token committed for "
                            f"{wd.tokenless_for:.1f}s (watch.progress_stall_s), ranks not all blocked"
                        ),
                    )
                elif now - booted > float(w.max_run_s):
                    verdict = "straggler" if wd.status == "straggler" else "timeout"
                    reason = f"watch.max_run_s={w.max_run_s} reached ({wd.status})"
                elif self.driver.shutdown_sent and wd.stalled_for > float(w.shutdown_grace_s):
                    verdict, reason = "crashed", "ranks did not leave after shutdown"
                served = self.driver.count("served")
                prog.maybe(
                    served,
                    self.driver.stream.tokens,
                    int(self.board.fields(0)[F.FLIPS]),
                    int(self.board.fields(0)[F.VOIDS]),
                    int(self.board.fields(0)[F.INFLIGHT]),
                    wd.status,
                )
            self.driver.collect()
            self._sample(time.time())
            if verdict != "served":
                if self.mirror is not None:  # remote stacks land beside the local ones
                    self.mirror.request_stacks()
                runnable = None
                if verdict not in ("wedged", "mismatch", "dead_peer"):
                    # ranks still passing (a stall, a loss, a budget): a record younger
                    # than the stall window is a wait in passing, not a blocked rank
                    runnable = {
                        r
                        for r, rec in enumerate(self.board.blocked_on(r) for r in range(self.world))
                        if rec is None or rec["since_s"] < float(w.stall_s)
                    }
                pm = postmortem.write(
                    self.run_dir, self.board, self.procs, verdict, t0_ns, self.t0,
                    runnable=runnable, backend=wire_spec(self.cfg).recorder_backend,
                )  # fmt: skip
        finally:
            self._teardown()
            for s, h in old.items():
                signal.signal(s, h)
        for r in range(self.world):
            self._report(r)
        self.driver.finalize()
        return self.tally.outcome(self.board, verdict, reason, pm, getattr(self, "boot_s", None))

    def _teardown(self) -> None:
        """Every child goes, on every path (a rank told to shut down gets 3 s to leave)."""
        told = getattr(self, "driver", None) is not None and self.driver.shutdown_sent
        queues = (getattr(self, "in_q", None), getattr(self, "out_q", None))
        stop_children(getattr(self, "procs", []), 3.0 if told else 0.0, self.mirror, queues)
