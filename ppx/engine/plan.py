"""Execution plans: what a rank runs in each phase.

PP phase: a contiguous slice of layers with every head; TP phase: every layer on this rank's
shard of heads, KV heads and MLP columns. The KV layout differs, so a switch builds a fresh
cache (and keeps one host tier per layout, so KV saved in a phase reloads in that phase).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ppx.engine.board import F
from ppx.engine.cache.host import HostTier
from ppx.engine.cache.kv import KVCache
from ppx.engine.context import Plan
from ppx.engine.kernels.registry import get_kernels
from ppx.engine.model.factory import build_stage, eos_ids, model_key
from ppx.engine.model.stage import Stage
from ppx.engine.moves import Moves
from ppx.engine.scheduler import Scheduler
from ppx.engine.shapes import dims_of, pool_sizes
from ppx.engine.tp_phase import all_reducer
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.engine.context import RankContext


class Planner:
    """Builds a rank's plan per phase; models and host tiers are kept across flips."""

    def __init__(
        self,
        ctx: RankContext,
        device: str,
        moves: Moves,
        shared: dict | None = None,
        per_slot: bool = False,
    ) -> None:
        cfg = ctx.cfg
        # every plan's scheduler reports its moves to the rank's one ledger, listener, trace
        self.moves = moves
        self.ctx, self.device = ctx, device
        self.per_slot = per_slot  # engine.admission.continuations=per_slot: a cell per slot
        # models and KV caches built by earlier runs in this process (the explorer runs
        # hundreds of schedules of one engine): weights are immutable, only the TP all-reduce
        # is per run; a cache is reset in place when a run switches to its phase
        self.shared = shared
        self.dims, self.dtype = dims_of(cfg), getattr(torch, cfg.model.dtype)
        self.kernels = get_kernels(cfg.engine.kernels.name, device)
        self.pools = pool_sizes(cfg)
        self.models: dict[str, Stage] = {}
        self.eos = eos_ids(cfg)
        self.hosts: dict[str, HostTier] = {}

    def _model(self, phase: str) -> Stage:
        ctx, cfg = self.ctx, self.ctx.cfg
        key = (phase, ctx.rank, ctx.world, model_key(cfg), cfg.engine.kernels.name, self.device)
        if phase not in self.models and self.shared is not None and key in self.shared:
            self.models[phase] = self.shared[key]
            if phase == "tp":
                self.models[phase].all_reduce = all_reducer(ctx)
        if phase not in self.models:
            ar = all_reducer(ctx) if phase == "tp" else None
            self.models[phase] = build_stage(
                cfg, phase, ctx.rank, ctx.world, self.kernels, self.device, ar
            )
            if self.shared is not None:
                self.shared[key] = self.models[phase]
        return self.models[phase]

    def switch(self, phase: str) -> None:
        """Install the plan for `phase`: its model, a fresh KV cache for its layout, and a
        scheduler that inherits every request (residents were re-queued by the cutover)."""
        ctx, d, cfg, e = self.ctx, self.dims, self.ctx.cfg, self.ctx.cfg.engine
        r, world = ctx.rank, ctx.world
        model = self._model(phase)
        kv_heads = d.kv_heads if phase == "pp" else d.kv_heads // world
        shape = (model.num_layers, self.pools[r], kv_heads, d.head_dim, e.max_reqs,
                 cfg.model.max_context, self.device, self.dtype)  # fmt: skip
        key = ("kv", phase, r, world, *shape)
        cache = self.shared.get(key) if self.shared is not None else None
        if cache is not None:  # the explorer's: the last schedule's pools, emptied in place
            cache.reset()
        else:
            cache = KVCache(*shape)
            if self.shared is not None:
                self.shared[key] = cache
        if e.kv.host_tier:  # one host tier per layout: KV saved in the PP phase reloads in PP
            ms = list(e.kv.prefetch_ms) if e.kv.prefetch_ms is not None else [20.0] * world
            if phase not in self.hosts:
                self.hosts[phase] = HostTier(
                    cache.k, cache.v, float(ms[r]) / 1e3, ctx.t.now, ctx.t.arrival
                )
            self.hosts[phase].rebind(cache.k, cache.v)
            cache.host = self.hosts[phase]
        cache.readiness = ctx.faults.readiness  # faults.match_cap.tokens: what its match reports
        # rank 0 admits what every rank can hold wherever its decision travels (#1045)
        if ctx.is_first and (phase == "tp" or policy_of(cfg).decides):
            cache.slack = self.pools[r] - min(self.pools)  # admit what every rank can hold
        num_slots = world if phase == "pp" else 1
        sched = Scheduler(
            cache,
            num_slots,
            e.chunk_size,
            e.max_batch,
            self.device,
            candidates=ctx.faults.candidates,  # faults.lifo: the order it scans its queue
            eos=self.eos,
            per_slot=self.per_slot,
            moves=self.moves,
        )
        if ctx.plan is not None:
            sched.inherit(ctx.plan.sched)
        ctx.plan = Plan(phase, model, cache, sched, num_slots)
        ctx.board.set(F.PHASE, 0 if phase == "pp" else 1)
