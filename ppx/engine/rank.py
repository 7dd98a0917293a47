"""The rank: setup, the pass loop, teardown.

A gloo/nccl rank is a process spawned by the supervisor with explicit arguments (never
re-running Hydra), `rank_main` in ppx/engine/process.py; a simulated rank is a task of ppx.sim running the very same
`RankLoop` over a SimTransport. Every exit path records why on the status board and in the
rank's report.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO
from typing import Protocol as TypingProtocol

from ppx.core import StopRun
from ppx.engine.admission import make_seams
from ppx.engine.board import Board, F, RankBoard, State
from ppx.engine.conservation import Conservation
from ppx.engine.context import RankContext
from ppx.engine.faults.channels import channels_for
from ppx.engine.faults.rank_faults import RankFaults
from ppx.engine.flip import FlipControl
from ppx.engine.intake import Intake
from ppx.engine.loop import PassState, PassSteps
from ppx.engine.moves import Moves
from ppx.engine.plan import Planner
from ppx.engine.results import Results
from ppx.engine.ring import Ring
from ppx.engine.tp_phase import TPPhase
from ppx.engine.transport import Transport
from ppx.engine.transport.base import Abandoned
from ppx.engine.transport.registry import spec_of
from ppx.protocol.continuations import Continuations
from ppx.protocol.flip import StartPhase
from ppx.protocol.ordering import ordering_for
from ppx.protocol.readiness import Readiness
from ppx.protocol.registry import Protocol, pass_steps
from ppx.protocol.told_scope import ToldScope
from ppx.protocol.width_check import WidthCheck
from ppx.telemetry.events import EventLog

if TYPE_CHECKING:
    from ppx.config import PPXConfig


class StoreSource(TypingProtocol):
    """Where a rank under torchrun rendezvouses (ppx.launch.store.StoreSpec): anything that
    opens the c10d store torchrun's agents share."""

    def connect(self): ...


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
    store: StoreSource | None = None  # under torchrun: rendezvous through its c10d store
    # forkserver only: the supervisor's environment when it started this rank (a forkserver
    # child inherits the forkserver's, which is as old as the process's first run; a spawn
    # child inherits the current one by itself)
    env: dict[str, str] | None = None
    # the simulator's, with run_dir None: a text stream the rank's events go to (the
    # explorer's runs whose end property reads events; io objects are opaque to the
    # state fingerprint, so the events never enter a state)
    event_sink: TextIO | None = None


class RankLoop:
    """One rank: its context, the designs it runs, its plan, and the loop of passes."""

    def __init__(self, a: RankArgs, t: Transport, board: Board) -> None:
        cfg = a.cfg
        rb = RankBoard(board, a.rank)
        rb.enabled = bool(cfg.watch.blocked_on)
        path = os.path.join(a.run_dir, "ranks", f"rank{a.rank}.events.jsonl") if a.run_dir else None
        events = EventLog(path, a.rank, a.t0, t.now, a.event_sink)
        # nccl: one GPU per rank; gloo with device=cuda: the ranks share a GPU, tensors
        # cross via the host
        device = spec_of(cfg).rank_device(cfg, t)
        self.proto = proto = Protocol(cfg)  # the designs this rank runs (ppx/protocol)
        budget = proto.of(Readiness).budget_s()
        # a fault that needs the scheduler asks for the current plan's (a flip replaces it),
        # through the context built next: the lambda reads `ctx` when called, never before
        faults = RankFaults(cfg, a.rank, t)  # this rank's injected faults (ppx/engine/faults)
        ch = channels_for(a.rank, a.world, t, rb, device, faults.wire, budget, lambda: ctx.sched)
        self.ctx = ctx = RankContext(a.rank, a.world, cfg, t, ch, rb, events, faults)
        self.t, self.events = t, events
        self.debug = _debug()
        tracer = self._tracer() if self.debug else None
        retracted = proto.of(ToldScope).retracted  # the retract chokepoint's listener
        per_slot = proto.of(Continuations).per_slot
        # conservation and progress (engine/conservation.py), kept across every plan
        self.ledger = Conservation(ctx.rank, int(cfg.engine.liveness.stall_passes))
        moves = Moves(self.ledger, on_requeue=retracted, trace=tracer)
        self.planner = Planner(ctx, device, moves, a.shared_models, per_slot)
        self.planner.switch(proto.of(StartPhase).name if cfg.flip.enabled else "pp")
        self.seams = seams = make_seams(ctx, proto)
        self.flip = FlipControl(ctx, self.planner, proto, seams.cutover)
        mx = cfg.model.max_context
        intake = Intake(a.in_q, a.out_q, mx, min(self.planner.pools)) if ctx.is_first else None
        self.intake = intake
        carry = faults.carry  # faults.retract: what rank 0's chain carries, else inert
        results = Results(ctx, seams, intake, carry)
        self.tp = TPPhase(ctx, seams, proto, self.flip, intake, results)
        ring, width = Ring.of(proto), proto.of(WidthCheck)
        o = cfg.engine.ordering  # this rank's steps: its per_rank list, or the shared one
        extra = tuple(pass_steps())  # the pass steps designs add (registry.pass_steps)
        ordering = ordering_for(list(o.steps), dict(o.per_rank), ctx.rank, ctx.world, extra)
        self.steps = PassSteps(ctx, ordering, seams, self.flip, ring, width, intake, results, carry)
        self.steps.hook_designs(proto.chosen.values())
        self.kv = KVLedger()  # the KV ledger's violations, checked when idle and at teardown

    # -- the current plan and the context, as the loop reads them --------------------------
    sched = property(lambda self: self.ctx.sched)
    cache = property(lambda self: self.ctx.cache)
    phase = property(lambda self: self.ctx.phase)
    num_slots = property(lambda self: self.ctx.num_slots)
    stop_reason = property(lambda self: self.ctx.stop_reason)

    def _tracer(self) -> Callable[[str], None]:
        """PPX_DEBUG=1: admits and requeues traced to the rank's log with their call sites."""

        def trace(msg: str) -> None:
            where = " < ".join(f"{f.name}" for f in traceback.extract_stack(limit=6)[:-2][::-1])
            print(
                f"[trace rank{self.ctx.rank} pass {self.ctx.board.f[F.PASS]} {self.phase}] {msg}  ({where})",
                flush=True,
            )

        return trace

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> None:
        pass_id, was_idle = 0, False
        while True:
            self.ctx.board.beat(pass_id)
            if self.phase == "pp":
                p = PassState(pass_id, pass_id % self.num_slots)
                self.steps.run(p)
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
        broken = self.ledger.check(self.sched, pass_id)
        if broken is not None:
            self.ctx.stop(broken)
        inflight, board = self.sched.num_inflight, self.ctx.board
        board.set(F.INFLIGHT, inflight)
        if inflight > board.f[F.MAX_INFLIGHT]:
            board.set(F.MAX_INFLIGHT, inflight)
        board.set(F.PREFILL_TOKENS, self.sched.tally.prefill)
        if self.intake is not None:
            self.intake.flush_out()
        self.ctx.faults.readiness.after_pass(pass_id, self.cache)  # faults.cache_drop
        idle = self.sched.idle
        if idle and not was_idle:
            self.check_ledger("idle")
        return idle

    def check_ledger(self, when: str) -> dict:
        return self.kv.check(self.cache.ledger(), when, self.events)

    def report(self, state: str, error: str | None) -> dict:
        # a rank that failed or was abandoned mid-pass holds KV in flight: read, not judged
        led = self.check_ledger("teardown") if state in ("done", "stopped") else self.cache.ledger()
        hosts = self.planner.hosts.values()
        return {
            "rank": self.ctx.rank,
            "state": state,
            "error": error,
            "stop_reason": self.stop_reason,
            "ledger": led,
            "ledger_violations": self.kv.violations,
            "cached_tokens": self.sched.tally.cached,
            "prefill_tokens": self.sched.tally.prefill,
            "evictions": self.cache.evictions,
            "pool_tokens": self.cache.pool_tokens,
            "counters": dict(self.events.counts),
            **self.design_counters(),
            "host_saves": sum(h.saves for h in hosts),
            "host_loads": sum(h.loads for h in hosts),
            # resident weights per phase (a real checkpoint's cross-stage memory) and the bytes
            # this rank read from the checkpoint (its own stage / shard only)
            "weight_bytes": {ph: m.weight_bytes for ph, m in self.planner.models.items()},
            "weight_bytes_read": sum(
                getattr(m, "bytes_read", 0) for m in self.planner.models.values()
            ),
        }

    def design_counters(self) -> dict:
        return {**self.proto.counters(), **self.seams.counters(), **self.flip.counters()}


class KVLedger:
    """The KV ledger's violations over the run (the cache's own audit, read when the rank
    goes idle and at teardown)."""

    def __init__(self) -> None:
        self.violations = 0
        self.last: dict = {}

    def check(self, led: dict, when: str, events: EventLog) -> dict:
        if led["num_violations"]:
            self.violations += led["num_violations"]
            events.emit("ledger_violation", detail=f"{when}: {led['violations'][:3]}")
        self.last = led
        return led


def serve(
    a: RankArgs, open_t: Callable[[], Transport], board: Board
) -> tuple[dict, RankLoop | None]:
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
        # the run ended (a peer stopped it) while this rank was parked on the wire: it still
        # reports what it counted, so a follower's retractions reach the summary
        state = "abandoned"
    except BaseException as e:  # noqa: BLE001 - every failure is reported
        state, error = "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    # when it failed, on the run's clock: the verdict names the first failure, not a peer's
    # `Connection closed by peer` that followed from it
    failed_at = loop.t.now() if loop is not None and state not in ("done", "abandoned") else None
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
