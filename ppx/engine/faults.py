"""Faults that live inside a rank's data path (the rest are wired where they act: delays in
`channels`, kills in the supervisor, pool skew in `shapes`). Each is off by default and
exists so a check can be seen failing for real: the oracle (`corrupt_token`) and the
channel seq check (`lose_message`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ppx.config import FaultsCfg
    from ppx.core import Req, SlotBatch

LAST_RANK = -2  # faults.corrupt_rank=-2: whichever rank samples (pp - 1)


def corrupt_sampled(
    f: FaultsCfg,
    rank: int,
    world: int,
    batch: SlotBatch,
    reqs: dict[int, Req],
    tokens: torch.Tensor,
    vocab: int,
) -> torch.Tensor:
    """faults.corrupt_token: the token sampled for request `corrupt_rid` at output position
    `corrupt_position` leaves the last rank as a different id. Every rank then applies the
    same wrong token, so the run stays internally consistent and only the oracle can tell."""
    if f.corrupt_rank not in (rank, LAST_RANK) or rank != world - 1:
        return tokens
    finals = [e for e in batch.entries if e.final]
    for i, e in enumerate(finals):
        if e.rid == f.corrupt_rid and len(reqs[e.rid].output) == f.corrupt_position:
            tokens = tokens.clone()  # the model's own output tensor stays as it was
            tokens[i] = (int(tokens[i]) + 1) % vocab
    return tokens
