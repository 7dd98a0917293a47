"""Carrying a continuation's KV across a cutover (flip.continuation=survive).

The PP layout holds every KV head of a slice of layers; the TP layout every layer of a shard
of KV heads. One all_gather of what each rank holds of the request's computed tokens gives
every rank the whole [layers, k|v, tokens, heads, head_dim] block; each keeps its new
layout's part in a fresh row of the new cache. Every rank carries the same requests (the
scheduler state the decisions keep equal) in the same order, so the collectives match.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ppx.engine.board import Op

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.engine.cache.kv import KVCache
    from ppx.engine.context import RankContext


def held_block(cache: KVCache, req: Req) -> torch.Tensor:
    """[layers here, 2, computed, kv heads here, head_dim] of `req` in `cache`, on the CPU."""
    idx = torch.tensor(cache.rows[req.rid][: req.computed], dtype=torch.long)
    idx = idx.to(cache.k[0].device)
    return torch.stack([torch.stack([k[idx], v[idx]]) for k, v in zip(cache.k, cache.v)]).cpu()


def carried_prefix(new: KVCache, req: Req) -> int:
    """What the new layout's tree already holds of `req`'s computed tokens: a prefix an
    earlier carried request committed (a shared system prompt, a repeated prompt). Reused as
    a prefill would reuse it; copied once per request, two continuations that shared it in
    the old layout's pool need more than that pool in the new one (`KV pool exhausted` on
    a follower whose pool is cut, found by the scenario generator with a repeated prompt)."""
    return len(new.tree.match(req.tokens[: req.computed])[0])


def carry(ctx: RankContext, old: KVCache, reqs: list[Req], target: str, pass_id: int) -> None:
    """Give each of `reqs` (resident mid-prefill in `old`) a row of the current plan's cache
    holding the KV it computed, laid out for `target`."""
    new, rank, world = ctx.cache, ctx.rank, ctx.world
    for req in sorted(reqs, key=lambda r: r.rid):
        mine = held_block(old, req)
        since = ctx.board.block(Op.RECV, -1, 0, -1, pass_id, -1)
        parts = ctx.t.all_gather(mine.contiguous())
        ctx.board.unblock(Op.RECV, -1, 0, -1, pass_id, -1, since)
        if target == "tp":  # every layer (the ranks' slices in order), this rank's head shard
            full = torch.cat(parts, dim=0)
            h = full.shape[3] // world
            part = full[:, :, :, rank * h : (rank + 1) * h]
        else:  # every head (the ranks' shards in order), this rank's slice of layers
            full = torch.cat(parts, dim=3)
            n = len(new.k)  # the KV layers a stage of the new plan holds
            # a model whose stages each hold one KV layer, whatever the split (model=hash:
            # the same content in every layer) keeps it whole; a real model its slice
            part = full if full.shape[0] == n else full[rank * n : (rank + 1) * n]
        n = req.computed
        have = carried_prefix(new, req)
        new.admit(req, have, req.seq_len - have + req.remaining_new)
        locs = torch.tensor(new.extend(req, n - have), dtype=torch.long, device=new.k[0].device)
        part = part[:, :, have:].to(new.k[0].device, new.k[0].dtype)
        for layer, (k, v) in enumerate(zip(new.k, new.v)):
            k[locs] = part[layer, 0]
            v[locs] = part[layer, 1]
        new.commit(req)  # its chunks were computed: later requests share them in this layout
