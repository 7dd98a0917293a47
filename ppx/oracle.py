"""The oracle: every served request's tokens against the single-process reference.

Token t must be the reference's greedy choice for the prompt plus the run's own tokens before
t (teacher forcing), unless the reference's margin between its choice and the run's token is
below `tol` (a near-tie: float results are not batch- or layout-invariant, so two correct
runs may part there). Mismatches are counted and named.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ppx.engine.model.llama import Reference
from ppx.engine.model.weights import Dims

NEAR_TIE = 1e-3
NEAR_TIE_LOW_PRECISION = 0.1  # a bf16 / fp16 run against the fp32 reference


@dataclass
class Mismatch:
    rid: int
    position: int
    expected: int
    got: int
    margin: float

    def __str__(self) -> str:
        return f"rid {self.rid} token {self.position}: expected {self.expected}, got {self.got} (margin {self.margin:.4g})"


class Oracle:
    def __init__(self, dims: Dims, seed: int, tol: float = NEAR_TIE, ref=None) -> None:
        self.ref = ref if ref is not None else Reference(dims, seed)
        self.tol = tol

    @classmethod
    def for_config(cls, cfg) -> Oracle:
        """The reference of whatever model the config names (random or a checkpoint)."""
        from ppx.engine.model.factory import reference
        from ppx.engine.shapes import dims_of

        tol = cfg.oracle.tol if "oracle" in cfg else None
        if tol is None:
            tol = NEAR_TIE if cfg.model.dtype == "float32" else NEAR_TIE_LOW_PRECISION
        return cls(dims_of(cfg), int(cfg.seed), float(tol), reference(cfg))

    def check(self, prompt: list[int], output: list[int], rid: int = -1) -> list[Mismatch]:
        if not output:
            return []
        logits = self.ref.logits(prompt + output[:-1])
        rows = logits[len(prompt) - 1 :]
        best = rows.argmax(-1)
        got = torch.tensor(output)
        out = []
        for t in torch.nonzero(best != got).flatten().tolist():
            margin = float(rows[t, best[t]] - rows[t, got[t]])
            if margin > self.tol:
                out.append(Mismatch(rid, t, int(best[t]), int(got[t]), margin))
        return out


def sample_rids(rids: list[int], sample: float, seed: int = 0) -> list[int]:
    """The requests the oracle checks: all of them at sample=1, else a seeded subset -- a
    fraction when sample <= 1, a count when sample > 1 -- so a large model's check stays
    affordable and the same run always checks the same requests."""
    rids = sorted(rids)
    n = len(rids) if sample >= len(rids) or sample == 1 else (
        int(sample) if sample > 1 else max(1, round(sample * len(rids)))
    )  # fmt: skip
    if n >= len(rids):
        return rids
    import random

    return sorted(random.Random(f"oracle/{seed}").sample(rids, n))
