"""Transports: the one seam between a rank and its peers (see base.py).

`gloo` and `nccl` are opened here, per rank process; `sim` transports are made by the
simulator (ppx/sim), which owns every rank of a run in one process.
"""

from __future__ import annotations

from ppx.engine.transport.base import Handle, Transport

__all__ = ["Handle", "Transport", "open_transport"]


def open_transport(kind: str, rank: int, world: int, port: int, num_kinds: int) -> Transport:
    if kind == "nccl":  # one GPU per rank
        from ppx.engine.transport.nccl import NcclTransport

        return NcclTransport(rank, world, port, num_kinds)
    if kind == "gloo":
        from ppx.engine.transport.gloo import GlooTransport

        return GlooTransport(rank, world, port)
    raise ValueError(f"transport {kind!r} is not opened per process (sim runs in ppx.sim)")
