"""Model and pool shapes derived from the config: what every rank and the oracle build."""

from __future__ import annotations

from ppx.engine.faults.rank_faults import RunFaults
from ppx.engine.model.weights import Dims


def dims_of(cfg) -> Dims:
    m = cfg.model
    return Dims(
        m.vocab,
        m.hidden,
        m.layers,
        m.heads,
        m.kv_heads,
        m.intermediate,
        float(m.rope_theta),
        float(m.eps),
        float(m.logit_scale),
    )


def pool_sizes(cfg) -> list[int]:
    """Per-rank KV pool sizes (in real PP they differ: an honest divergence source)."""
    ppr = cfg.engine.kv.pool_per_rank
    sizes = list(ppr) if ppr is not None else [int(cfg.engine.kv.pool_tokens)] * int(cfg.pp)
    return RunFaults(cfg).pool_sizes(sizes)  # faults.pool: one rank's pool skewed
