"""Forward inputs: a slot batch resolved against this rank's cache (positions, rows, slots).

Built per pass on every rank, so the decode path (one token per request) builds one tensor of
columns instead of a tensor per field.
"""

from __future__ import annotations

from typing import Protocol

import torch

from ppx.core import ForwardInputs, Req, SlotBatch
from ppx.engine.int_tensor import int_tensor


class Scheduled(Protocol):
    """What the inputs read of a rank's scheduler (engine/scheduler.py builds them; no
    import back)."""

    reqs: dict[int, Req]
    locs: dict[int, list[int]]
    device: str


def forward_inputs(sched: Scheduled, batch: SlotBatch, first_stage: bool) -> ForwardInputs:
    """What a stage's forward needs for `batch`, resolved against this rank's cache."""
    if batch.mode == "decode" and all(e.extend_len == 1 and e.final for e in batch.entries):
        return _decode_inputs(sched, batch, first_stage)
    pos: list[int] = []
    ids: list[int] = []
    rows, prefix, qo, sample = [], [], [0], []
    for e in batch.entries:
        req = sched.reqs[e.rid]
        pos += range(e.prefix_len, e.end)
        if first_stage:
            ids += req.tokens[e.prefix_len : e.end]
        rows.append(req.row)
        prefix.append(e.prefix_len)
        qo.append(qo[-1] + e.extend_len)
        if e.final:
            sample.append(qo[-1] - 1)

    def t(x):
        return int_tensor(x, device=sched.device)

    return ForwardInputs(
        mode=batch.mode,
        positions=t(pos),
        qo_indptr=t(qo),
        prefix_lens=t(prefix),
        req_rows=t(rows),
        out_cache_loc=t(sched.locs[batch.pass_id]),
        sample_rows=t(sample),
        input_ids=t(ids) if first_stage else None,
    )


def _decode_inputs(sched: Scheduled, batch: SlotBatch, first_stage: bool) -> ForwardInputs:
    """The same inputs for a decode batch (one token per request, every one sampled) from
    one tensor of columns, instead of a tensor per field and lists grown per token."""
    pos, rows, ids = [], [], []
    for e in batch.entries:
        req = sched.reqs[e.rid]
        pos.append(e.prefix_len)
        rows.append(req.row)
        if first_stage:
            ids.append(req.token_at(e.prefix_len))
    n, dev = len(pos), sched.device
    cols = int_tensor(pos + pos + rows + ids if first_stage else pos + pos + rows)
    cols = cols.view(4 if first_stage else 3, n).to(dev)
    return ForwardInputs(
        mode=batch.mode,
        positions=cols[0],
        qo_indptr=torch.arange(n + 1, device=dev),
        prefix_lens=cols[1],
        req_rows=cols[2],
        out_cache_loc=int_tensor(sched.locs[batch.pass_id], device=dev),
        sample_rows=torch.arange(n, device=dev),
        input_ids=cols[3] if first_stage else None,
    )
