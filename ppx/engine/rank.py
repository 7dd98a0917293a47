"""The rank process: setup, the pass loop, teardown.

Spawned by the supervisor with explicit arguments (never re-running Hydra). Every exit path
records why on the status board and in `ranks/rank{r}.json`.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import signal
import sys
import traceback
from dataclasses import dataclass

import torch
from omegaconf import OmegaConf

from ppx.config import dims_of, pool_sizes
from ppx.core import Flag, Kind, Message, StopRun
from ppx.engine.admission import make_policy
from ppx.engine.board import Board, F, RankBoard, State
from ppx.engine.channels import Channels
from ppx.engine.flip import FlipControl
from ppx.engine.intake import Intake
from ppx.engine.kernels.registry import get_kernels
from ppx.engine.loop import PassState, PassSteps, parse_ordering
from ppx.engine.plan import switch_plan
from ppx.engine.tp_phase import TPPhase
from ppx.engine.transport.gloo import GlooTransport
from ppx.telemetry.events import EventLog


@dataclass
class RankArgs:
    rank: int
    world: int
    port: int
    run_dir: str
    board_path: str
    cfg: dict
    t0: float
    in_q: object = None
    out_q: object = None


def _die_with_parent() -> None:
    """No orphans even if the supervisor is SIGKILLed: the kernel kills us with it."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


DEBUG = os.environ.get("PPX_DEBUG") == "1"


class RankLoop(PassSteps):
    def __init__(self, a: RankArgs) -> None:
        cfg = self.cfg = OmegaConf.create(a.cfg)
        self.rank, self.world, self.run_dir = a.rank, a.world, a.run_dir
        self.is_first, self.is_last = a.rank == 0, a.rank == a.world - 1
        self.prev, self.next = (a.rank - 1) % a.world, (a.rank + 1) % a.world
        self.num_slots = a.world  # S = pp slots in flight
        self.epoch = 0
        self.board = RankBoard(Board(a.board_path, a.world), a.rank)
        self.board.enabled = bool(cfg.watch.blocked_on)
        self.events = EventLog(
            os.path.join(a.run_dir, "ranks", f"rank{a.rank}.events.jsonl"), a.rank, a.t0
        )
        if cfg.engine.transport == "nccl":  # one GPU per rank
            from ppx.engine.board import NUM_KINDS
            from ppx.engine.transport.nccl import NcclTransport

            self.t = NcclTransport(a.rank, a.world, a.port, NUM_KINDS)
            self.device = self.t.payload_device
        else:  # gloo; with device=cuda the ranks share one GPU and tensors cross via the host
            self.t = GlooTransport(a.rank, a.world, a.port)
            self.device = str(cfg.device)
        self.ch = Channels(a.rank, a.world, self.t, self.board, self.device)
        if cfg.engine.readiness:
            self.ch.readiness_budget_s = float(cfg.engine.readiness_budget_s)
        if cfg.faults.delay_kind and cfg.faults.delay_rank in (a.rank, -2):
            self.ch.delays[Kind[cfg.faults.delay_kind.upper()]] = float(cfg.faults.delay_s)
        self.dims, self.dtype = dims_of(cfg), getattr(torch, cfg.model.dtype)
        self.kernels = get_kernels(cfg.engine.kernels.name)
        self.pools = pool_sizes(cfg)
        self.models: dict = {}  # phase -> StageModel
        self.hosts: dict = {}  # phase -> HostTier
        self.steps = parse_ordering(list(cfg.engine.ordering.steps))
        self.sched = None
        self.phase = cfg.flip.start_phase if cfg.flip.enabled else "pp"
        self.switch_plan(self.phase)
        self.policy = make_policy(cfg.engine.admission.name, self)
        self.flip = FlipControl(self)
        self.tp = TPPhase(self)
        mx = cfg.model.max_context
        self.intake = Intake(a.in_q, a.out_q, mx, min(self.pools)) if self.is_first else None
        self.sampled: dict[int, torch.Tensor] = {}
        self.to_relay: Message | None = None
        self.stop_reason: str | None = None

    def switch_plan(self, phase: str) -> None:
        switch_plan(self, phase)

    # -- hooks used by the steps ---------------------------------------------------------
    def on_chain(self, p: PassState, msg: Message) -> None:
        """Control riding the chain: a flip announced at this pass, on every rank at once."""
        if msg.flags & Flag.FLIP:
            self.flip.announce(p.pass_id)

    def stop(self, reason: str, p: PassState | None = None) -> None:
        self.stop_reason = reason
        self.events.emit(
            "stop", p.pass_id if p else -1, p.slot if p else -1, epoch=self.epoch, detail=reason
        )
        raise StopRun(reason)

    def apply_output(self, slot: int, batch, msg: Message, p: PassState | None) -> None:
        if (
            batch.flip_void
        ):  # flip.inflight=void: the slot's results are dropped, requests re-queued
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
            if DEBUG and self.sched.limbo():
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
            was_idle = idle
            if shutdown:
                return
            pass_id += 1

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
            "host_saves": sum(h.saves for h in self.hosts.values()),
            "host_loads": sum(h.loads for h in self.hosts.values()),
        }

    def policy_counters(self) -> dict:
        return {**getattr(self.policy, "counters", lambda: {})(), **self.flip.counters()}


def rank_main(a: RankArgs) -> None:
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
    board = RankBoard(Board(a.board_path, a.world), a.rank)
    loop, state, error = None, "done", None
    try:
        loop = RankLoop(a)
        board.set(F.STATE, State.RUNNING)  # booted: rendezvous done, model and cache built
        loop.run()
    except StopRun as e:
        state, error = "stopped", str(e)
    except BaseException as e:  # noqa: BLE001 - every failure is reported, then re-raised
        state, error = "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
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
    with open(os.path.join(a.run_dir, "ranks", f"rank{a.rank}.json"), "w") as f:
        json.dump(report, f, indent=1)
    board.set(F.STATE, State.DONE if state == "done" else State.ERROR)
    if loop is not None:
        loop.events.close()
        if state == "done":
            loop.t.close()
    stack_file.flush()
    sys.stdout.flush()
    # after a stop or an error the peers may be blocked on us: leave without waiting on gloo
    os._exit(0 if state == "done" else 3)
