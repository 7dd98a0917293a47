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
    def __init__(self, dims: Dims, seed: int, tol: float = NEAR_TIE) -> None:
        self.ref = Reference(dims, seed)
        self.tol = tol

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
