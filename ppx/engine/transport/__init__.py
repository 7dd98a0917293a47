"""Transports: the one seam between a rank and its peers (see base.py).

Each transport is a spec in registry.py (its validation, its payload device, how a rank opens
it): `gloo` and `nccl` are opened per rank process; `sim` transports are made by the
simulator (ppx/sim), which owns every rank of a run in one process.
"""

from __future__ import annotations

import torch

from ppx.engine.transport.base import Handle, Transport

__all__ = ["Handle", "Transport", "bind_device"]


def bind_device(device: str) -> int | None:
    """Make `device` this process's current CUDA device (None for cpu / a bare `cuda`).
    Without it a rank on `cuda:1` allocates on cuda:1 but launches triton kernels and makes
    NCCL's streams on the current device, cuda:0."""
    d = torch.device(device)
    if d.type != "cuda" or d.index is None:
        return None
    torch.cuda.set_device(d.index)
    return d.index
