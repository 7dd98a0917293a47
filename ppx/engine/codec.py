"""Wire codec for the request chain: requests as one flat int64 tensor (no pickle)."""

from __future__ import annotations

import torch

from ppx.core import Kind, Message, Req
from ppx.engine.int_tensor import int_tensor


def encode_requests(reqs: list[Req]) -> list[torch.Tensor]:
    """[n, (rid, prompt_len, max_new, *prompt) ...]; no tensor at all for an empty chain, so
    an empty chain message is header-only."""
    if not reqs:
        return []
    flat = [len(reqs)]
    for r in reqs:
        flat += [r.rid, r.prompt_len, r.max_new, *r.prompt]
    return [int_tensor(flat)]


def decode_requests(msg: Message) -> list[Req]:
    if not msg.tensors:
        return []
    flat = msg.tensors[0].tolist()
    n, i, out = flat[0], 1, []
    for _ in range(n):
        rid, plen, max_new = flat[i : i + 3]
        out.append(Req(rid, flat[i + 3 : i + 3 + plen], max_new))
        i += 3 + plen
    return out


def chain_message(
    reqs: list[Req], flags: int, slot: int, pass_id: int, epoch: int, aux: tuple[int, ...] = ()
) -> Message:
    return Message(
        Kind.CHAIN, slot, pass_id, epoch, flags=flags, aux=aux, tensors=encode_requests(reqs)
    )
