"""Transports: the one seam between a rank and its peers (see base.py).

`gloo` and `nccl` are opened here, per rank process; `sim` transports are made by the
simulator (ppx/sim), which owns every rank of a run in one process.
"""

from __future__ import annotations

import torch

from ppx.engine.transport.base import Handle, Transport

__all__ = ["Handle", "Transport", "bind_device", "open_transport"]


def bind_device(device: str) -> int | None:
    """Make `device` this process's current CUDA device (None for cpu / a bare `cuda`).
    Without it a rank on `cuda:1` allocates on cuda:1 but launches triton kernels and makes
    NCCL's streams on the current device, cuda:0."""
    d = torch.device(device)
    if d.type != "cuda" or d.index is None:
        return None
    torch.cuda.set_device(d.index)
    return d.index


def open_transport(
    kind: str,
    rank: int,
    world: int,
    port: int,
    num_kinds: int,
    device: str = "cpu",
    store=None,
) -> Transport:
    """`store`: rendezvous through this c10d store (torchrun's) instead of 127.0.0.1:port."""
    if kind == "nccl":  # one GPU per rank
        from ppx.engine.transport.nccl import NcclTransport

        return NcclTransport(rank, world, port, num_kinds, store=store)
    bind_device(device)  # the gloo path: every rank on the GPU the config names
    if kind == "gloo":
        from ppx.engine.transport.gloo import GlooTransport

        return GlooTransport(rank, world, port, store=store)
    raise ValueError(f"transport {kind!r} is not opened per process (sim runs in ppx.sim)")
