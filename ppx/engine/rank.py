"""The rank: setup, the pass loop, teardown.

A gloo/nccl rank is a process spawned by the supervisor with explicit arguments (never
re-running Hydra), `rank_main`; a simulated rank is a task of ppx.sim running the very same
`RankLoop` over a SimTransport. Every exit path records why on the status board and in the
rank's report.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ppx.core import Flag, Kind, Message, StopRun
from ppx.engine.admission import make_policy
from ppx.engine.board import Board, F, RankBoard, State
from ppx.engine.channels import Channels
from ppx.engine.context import RankContext
from ppx.engine.flip import FlipControl
from ppx.engine.intake import Intake
from ppx.engine.loop import PassState, PassSteps, parse_ordering
from ppx.engine.plan import Planner
from ppx.engine.tp_phase import TPPhase
from ppx.engine.transport import Transport
from ppx.engine.transport.base import Abandoned
from ppx.engine.transport.registry import spec_of
from ppx.telemetry.events import EventLog

if TYPE_CHECKING:
    from ppx.config import PPXConfig
    from ppx.launch.store import StoreSpec


def _debug() -> bool:
    # read when a rank starts, not at import: a forkserver imports this module once for all runs
    return os.environ.get("PPX_DEBUG") == "1"


@dataclass
class RankArgs:
    rank: int
    world: int
    port: int
    run_dir: str | None  # None: keep no files (the explorer's runs)
    board_path: str | None
    cfg: PPXConfig  # typed: the supervisor validated it
    t0: float
    in_q: object = None
    out_q: object = None
    shared_models: dict | None = None  # the simulator's: models kept across runs in-process
    store: StoreSpec | None = None  # under torchrun: rendezvous through its c10d store
    # forkserver only: the supervisor's environment when it started this rank (a forkserver
    # child inherits the forkserver's, which is as old as the process's first run; a spawn
    # child inherits the current one by itself)
    env: dict[str, str] | None = None


def _die_with_parent() -> None:
    """No orphans even if the supervisor is SIGKILLed: the kernel kills us with it."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    supervisor = mp.parent_process()
    if supervisor is not None and supervisor.pid != os.getppid():
        # a forkserver child: the kernel's parent is the forkserver, which lives as long as
        # any of its children does (each holds its liveness pipe), so the signal above would
        # never come. The supervisor's own pipe reads EOF the moment it dies.
        def watch() -> None:
            supervisor.join()
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=watch, name="ppx-supervisor-watch", daemon=True).start()


class RankLoop(PassSteps):
    def __init__(self, a: RankArgs, t: Transport, board: Board) -> None:
        cfg = self.cfg = a.cfg
        self.rank, self.world, self.run_dir = a.rank, a.world, a.run_dir
        rb = RankBoard(board, a.rank)
        rb.enabled = bool(cfg.watch.blocked_on)
        path = os.path.join(a.run_dir, "ranks", f"rank{a.rank}.events.jsonl") if a.run_dir else None
        events = EventLog(path, a.rank, a.t0, t.now)
        # nccl: one GPU per rank; gloo with device=cuda: the ranks share a GPU, tensors
        # cross via the host
        self.device = spec_of(cfg).rank_device(cfg, t)
        ch = Channels(a.rank, a.world, t, rb, self.device)
        if cfg.engine.readiness:
            ch.readiness_budget_s = float(cfg.engine.readiness_budget_s)
        if cfg.faults.delay_kind and cfg.faults.delay_rank in (a.rank, -2):
            ch.delays[Kind[cfg.faults.delay_kind.upper()]] = float(cfg.faults.delay_s)
        if cfg.faults.lose_kind and cfg.faults.lose_rank == a.rank:
            ch.lose = (int(Kind[cfg.faults.lose_kind.upper()]), int(cfg.faults.lose_seq))
        self.ctx = ctx = RankContext(a.rank, a.world, cfg, t, ch, rb, events)
        self.t, self.ch, self.board, self.events = t, ch, rb, events
        self.prev, self.next, self.is_first, self.is_last = (
            ctx.prev,
            ctx.next,
            ctx.is_first,
            ctx.is_last,
        )
        self.steps = parse_ordering(list(cfg.engine.ordering.steps))
        self.debug = _debug()
        tracer = self._tracer() if self.debug else None
        self.planner = Planner(ctx, self.device, tracer, a.shared_models)
        self.planner.switch(cfg.flip.start_phase if cfg.flip.enabled else "pp")
        self.policy = make_policy(cfg.engine.admission.name, ctx)
        self.flip = FlipControl(ctx, self.planner.switch, self.policy.readmit_told_row)
        mx = cfg.model.max_context
        self.intake = (
            Intake(a.in_q, a.out_q, mx, min(self.planner.pools)) if self.is_first else None
        )
        self.tp = TPPhase(ctx, self.policy, self.flip, self.intake, self.apply_output)
        self.sampled: dict[int, torch.Tensor] = {}
        self.to_relay: Message | None = None

    # -- the current plan and the context, as the steps read them --------------------------
    sched = property(lambda self: self.ctx.sched)
    cache = property(lambda self: self.ctx.cache)
    model = property(lambda self: self.ctx.model)
    phase = property(lambda self: self.ctx.phase)
    num_slots = property(lambda self: self.ctx.num_slots)
    stop_reason = property(lambda self: self.ctx.stop_reason)

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    def stop(self, reason: str, p: PassState | None = None) -> None:
        self.ctx.stop(reason, p)

    def _tracer(self) -> Callable[[str], None]:
        """PPX_DEBUG=1: admits and requeues traced to the rank's log with their call sites."""

        def trace(msg: str) -> None:
            where = " < ".join(f"{f.name}" for f in traceback.extract_stack(limit=6)[:-2][::-1])
            print(
                f"[trace rank{self.rank} pass {self.board.f[F.PASS]} {self.phase}] {msg}  ({where})",
                flush=True,
            )

        return trace

    # -- hooks used by the steps ---------------------------------------------------------
    def on_chain(self, p: PassState, msg: Message) -> None:
        """Control riding the chain: a flip announced at this pass, on every rank at once."""
        if msg.flags & Flag.FLIP:
            self.flip.announce(p.pass_id)

    def apply_output(self, slot: int, batch, msg: Message, p: PassState | None) -> None:
        if batch.flip_void:  # flip.inflight=void: the slot's results are dropped, re-queued
            self.sched.void(batch)
            return
        if self.policy.absorb(slot, batch, msg, p):
            return
        tokens = msg.tensors[0].tolist() if msg.tensors else []
        finals = sum(e.final for e in batch.entries)
        if len(tokens) != finals or msg.pass_id != batch.pass_id:
            self.stop(
                f"output mismatch: rank{self.rank} slot={slot} got pass={msg.pass_id} "
                f"width={len(tokens)} vs local pass={batch.pass_id} finals={finals}",
                p,
            )
        done = self.sched.apply_output(slot, tokens)
        self.board.add(F.TOKENS, len(done))
        for req, tok in done:
            if req.finished:
                self.board.add(F.FINISHED)
                self.policy.on_served(req.rid)
                self.events.emit(
                    "finish",
                    p.pass_id if p else -1,
                    slot,
                    req.rid,
                    self.epoch,
                    f"cached={req.cached}",
                )
            if self.is_first:
                self.intake.token(req.rid, tok, req.finished, req.cached)

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> None:
        pass_id, was_idle = 0, False
        runners = [(getattr(self, f"step_{s.name}"), s) for s in self.steps]
        while True:
            self.board.beat(pass_id)
            if self.phase == "pp":
                p = PassState(pass_id, pass_id % self.num_slots)
                for fn, step in runners:
                    fn(p, step)
                shutdown = p.shutdown
                if self.flip.draining and pass_id >= self.flip.cutover_pass():
                    self.flip.cutover(pass_id)
            else:
                shutdown, flip = self.tp.run_pass(pass_id)
                if flip:
                    self.flip.announce(pass_id)
                    self.flip.cutover(pass_id)
            was_idle = self.after_pass(pass_id, was_idle)
            if shutdown:
                return
            pass_id += 1

    def after_pass(self, pass_id: int, was_idle: bool) -> bool:
        """Bookkeeping between passes: board gauges, the token stream, the idle ledger check."""
        if self.debug and self.sched.limbo():
            raise AssertionError(
                f"pass {pass_id} ({self.phase}): requests in limbo {self.sched.limbo()}"
            )
        inflight = self.sched.num_inflight
        self.board.set(F.INFLIGHT, inflight)
        if inflight > self.board.f[F.MAX_INFLIGHT]:
            self.board.set(F.MAX_INFLIGHT, inflight)
        self.board.set(F.PREFILL_TOKENS, self.sched.prefill_tokens)
        if self.is_first:
            self.intake.flush_out()
        idle = self.sched.idle
        if idle and not was_idle:
            self.check_ledger("idle")
        return idle

    def check_ledger(self, when: str) -> dict:
        led = self.cache.ledger()
        if led["num_violations"]:
            self.ledger_violations += led["num_violations"]
            self.events.emit("ledger_violation", detail=f"{when}: {led['violations'][:3]}")
        self.last_ledger = led
        return led

    ledger_violations = 0
    last_ledger: dict = {}

    def report(self, state: str, error: str | None) -> dict:
        led = self.check_ledger("teardown") if state != "error" else self.cache.ledger()
        hosts = self.planner.hosts.values()
        return {
            "rank": self.rank,
            "state": state,
            "error": error,
            "stop_reason": self.stop_reason,
            "ledger": led,
            "ledger_violations": self.ledger_violations,
            "cached_tokens": self.sched.cached_tokens,
            "prefill_tokens": self.sched.prefill_tokens,
            "evictions": self.cache.evictions,
            "pool_tokens": self.cache.pool_tokens,
            "counters": dict(self.events.counts),
            **self.policy_counters(),
            "host_saves": sum(h.saves for h in hosts),
            "host_loads": sum(h.loads for h in hosts),
            # resident weights per phase (a real checkpoint's cross-stage memory) and the bytes
            # this rank read from the checkpoint (its own stage / shard only)
            "weight_bytes": {ph: m.weight_bytes for ph, m in self.planner.models.items()},
            "weight_bytes_read": sum(
                getattr(m, "bytes_read", 0) for m in self.planner.models.values()
            ),
        }

    def policy_counters(self) -> dict:
        return {**getattr(self.policy, "counters", lambda: {})(), **self.flip.counters()}


def serve(a: RankArgs, open_t: Callable[[], Transport], board: Board) -> tuple[dict, RankLoop]:
    """Build the rank and run its loop to the end; returns its report (every failure is in
    it) and the loop. Shared by the rank process and the simulator's rank task."""
    rb = RankBoard(board, a.rank)
    loop, state, error = None, "done", None
    try:
        loop = RankLoop(a, open_t(), board)
        rb.set(F.STATE, State.RUNNING)  # booted: rendezvous done, model and cache built
        loop.run()
    except StopRun as e:
        state, error = "stopped", str(e)
    except Abandoned:
        raise  # the run ended while we were parked: no report, like a killed process
    except BaseException as e:  # noqa: BLE001 - every failure is reported
        state, error = "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    # when it failed, on the run's clock: the verdict names the first failure, not a peer's
    # `Connection closed by peer` that followed from it
    failed_at = loop.t.now() if loop is not None and state != "done" else None
    try:
        report = (
            loop.report(state, error) if loop else {"rank": a.rank, "state": state, "error": error}
        )
    except Exception as e:  # noqa: BLE001 - a broken report must still leave a report
        report = {
            "rank": a.rank,
            "state": "error" if state == "done" else state,
            "error": f"{error or ''}\nreport failed: {type(e).__name__}: {e}\n{traceback.format_exc()}",
            "stop_reason": getattr(loop, "stop_reason", None),
        }
    report["failed_at"] = failed_at
    rb.set(F.STATE, State.DONE if report["state"] == "done" else State.ERROR)
    if loop is not None:
        loop.events.close()
    return report, loop


def write_report(a: RankArgs, report: dict) -> None:
    if a.run_dir:
        with open(os.path.join(a.run_dir, "ranks", f"rank{a.rank}.json"), "w") as f:
            json.dump(report, f, indent=1)


def rank_main(a: RankArgs) -> None:
    """The rank process (gloo / nccl)."""
    if a.env is not None:
        os.environ.clear()
        os.environ.update(a.env)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    _die_with_parent()
    # everything the rank prints (warnings, gloo's own messages) goes to its log in the run dir
    log = os.open(
        os.path.join(a.run_dir, "ranks", f"rank{a.rank}.log"),
        os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    )
    os.dup2(log, 1)
    os.dup2(log, 2)
    torch.set_num_threads(1)
    # faulthandler writes here on SIGUSR1; the post-mortem copies it into postmortem/stacks
    stack_file = open(os.path.join(a.run_dir, "ranks", f"rank{a.rank}.stack.txt"), "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    board = Board(a.board_path, a.world)
    # benchmarks/profile_pass.py: the engine's methods timed part by part (ppx/engine/passprof.py)
    prof = None
    if os.environ.get("PPX_PROFILE") == "1":
        from ppx.engine import passprof

        prof = passprof.install()

    def open_t() -> Transport:
        store = a.store.connect() if a.store else None
        return spec_of(a.cfg).open(a.cfg, a.rank, a.world, a.port, store)

    report, loop = serve(a, open_t, board)
    write_report(a, report)
    if prof is not None:
        prof.dump(os.path.join(a.run_dir, "ranks", f"rank{a.rank}.profile.json"))
    if loop is not None and report["state"] == "done":
        loop.t.close()
    stack_file.flush()
    sys.stdout.flush()
    # after a stop or an error the peers may be blocked on us: leave without waiting on gloo
    os._exit(0 if report["state"] == "done" else 3)
