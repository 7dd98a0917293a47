"""Execution plans: what a rank runs in each phase.

PP phase: a contiguous slice of layers with every head; TP phase: every layer on this rank's
shard of heads, KV heads and MLP columns. The KV layout differs, so a switch builds a fresh
cache (and keeps one host tier per layout, so KV saved in a phase reloads in that phase).
"""

from __future__ import annotations

import os

from ppx.engine.board import F
from ppx.engine.cache.host import HostTier
from ppx.engine.cache.kv import KVCache
from ppx.engine.model.llama import StageModel
from ppx.engine.scheduler import Scheduler
from ppx.engine.tp_phase import all_reducer

DEBUG = os.environ.get("PPX_DEBUG") == "1"


def switch_plan(self, phase: str) -> None:
    """Build (or reuse) the model for `phase`, a fresh KV cache for its layout, and a
    scheduler that inherits every request (residents were re-queued by the cutover)."""
    cfg, d, world, r = self.cfg, self.dims, self.world, self.rank
    if phase not in self.models:
        if phase == "pp":
            per = d.layers // world
            self.models[phase] = StageModel(
                d, cfg.seed, r * per, (r + 1) * per, self.kernels, self.device, self.dtype
            )
        else:
            self.models[phase] = StageModel(
                d,
                cfg.seed,
                0,
                d.layers,
                self.kernels,
                self.device,
                self.dtype,
                tp_rank=r,
                tp_size=world,
                all_reduce=all_reducer(self),
            )
    self.model = self.models[phase]
    kv_heads = d.kv_heads if phase == "pp" else d.kv_heads // world
    e = cfg.engine
    self.cache = KVCache(
        self.model.num_layers,
        self.pools[r],
        kv_heads,
        d.head_dim,
        e.max_reqs,
        cfg.model.max_context,
        self.device,
        self.dtype,
    )
    if e.kv.host_tier:  # one host tier per layout: KV saved in the PP phase reloads in PP
        ms = list(e.kv.prefetch_ms) if e.kv.prefetch_ms is not None else [20.0] * world
        if phase not in self.hosts:
            self.hosts[phase] = HostTier(self.cache.k, self.cache.v, float(ms[r]) / 1e3)
        self.hosts[phase].rebind(self.cache.k, self.cache.v)
        self.cache.host = self.hosts[phase]
    if self.is_first and (phase == "tp" or e.admission.name != "rank_local"):
        self.cache.slack = self.pools[r] - min(self.pools)  # admit what every rank can hold
    old = self.sched
    self.num_slots = world if phase == "pp" else 1
    self.sched = Scheduler(self.cache, self.num_slots, e.chunk_size, e.max_batch, self.device)
    self.sched.lifo = cfg.faults.lifo_rank == r
    if DEBUG:
        import traceback

        def trace(msg: str, loop=self) -> None:
            where = " < ".join(f"{f.name}" for f in traceback.extract_stack(limit=6)[:-2][::-1])
            print(
                f"[trace rank{loop.rank} pass {loop.board.f[F.PASS]} {loop.phase}] {msg}  ({where})",
                flush=True,
            )

        self.sched.trace = trace
    if old is not None:
        self.sched.waiting, self.sched.reqs = old.waiting, old.reqs
        self.sched.cached_tokens, self.sched.prefill_tokens = (
            old.cached_tokens,
            old.prefill_tokens,
        )
    if getattr(self, "policy", None) is not None:
        self.policy.sched = self.sched
    self.phase = phase
    self.board.set(F.PHASE, 0 if phase == "pp" else 1)
