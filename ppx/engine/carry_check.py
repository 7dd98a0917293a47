"""The carried KV against a fresh prefill, at the cutover (oracle.carry_check).

A continuation that survives a cutover keeps the KV it computed, re-laid out for the new
plan (carry.py). The oracle only sees tokens, and a float model with random weights often
keeps its argmax through a wrong KV row; so the rows themselves are checked where they are
written: each carried request's new rows against what the single-process reference writes
for the same tokens into a stage of the new layout (its layers, its KV heads). A row that
differs ends the run with a named stop, never a quiet `served`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ppx.engine.carry import held_block
from ppx.engine.model.factory import reference, stage_range

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.engine.cache.kv import KVCache
    from ppx.engine.model.hashed import HashReference
    from ppx.engine.model.llama import Reference

ATOL = 1e-3  # float32 K/V of a batched kernel vs the reference: a few 1e-6 in practice


class CarryCheck:
    """Built on the first carry of a rank (the reference is only needed then)."""

    def __init__(self, cfg, rank: int, world: int) -> None:
        self.cfg, self.rank, self.world = cfg, rank, world
        self.ref: Reference | HashReference | None = None
        self.checked = 0  # carried rows compared (a count the summary can show)

    def first_difference(self, cache: KVCache, req: Req, target: str) -> str | None:
        """None when `req`'s rows in `cache` (the `target` layout) are what a fresh prefill
        writes; else one line naming the request, layer, head and position."""
        ref = self.ref
        if ref is None:
            ref = self.ref = reference(self.cfg)
        d = ref.d
        first, last = stage_range(d.layers, target, self.rank, self.world)
        local = d.kv_heads // self.world if target == "tp" else d.kv_heads
        h0 = self.rank * local if target == "tp" else 0
        n = req.computed
        want = ref.kv(req.tokens[:n], first, last, range(h0, h0 + local)).float()
        got = held_block(cache, req).float()
        self.checked += n
        if got.shape != want.shape:
            return f"rid {req.rid}: carried block {tuple(got.shape)}, expected {tuple(want.shape)}"
        err = (got - want).abs()
        tol = ATOL * max(1.0, float(want.abs().max()))
        if float(err.max()) <= tol:
            return None
        layer, kv, pos, head, _ = (int(i) for i in torch.nonzero(err > tol)[0])
        return (
            f"carried KV differs from a fresh prefill: rank {self.rank} rid {req.rid} "
            f"{'kv'[kv]} layer {first + layer} head {h0 + head} position {pos} "
            f"(|diff| {float(err.max()):.3g}) after the cutover to {target}"
        )
