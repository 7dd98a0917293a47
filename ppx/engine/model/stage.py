"""What a rank uses of its stage model, whichever model the config names: the decoder
(llama.StageModel) or the protocol-speed hash model (hashed.HashStage). factory.build_stage
makes one; the planner keeps one per phase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from ppx.core import ForwardInputs


class Stage(Protocol):
    # the TP phase's all-reduce, set on a model the explorer shares across runs (plan.py)
    all_reduce: Callable[[torch.Tensor], torch.Tensor] | None
    weight_bytes: int  # the stage's resident weights
    bytes_read: int  # what building the stage read from disk

    @property
    def num_layers(self) -> int: ...

    def forward(
        self,
        fi: ForwardInputs,
        k_pool: list[torch.Tensor],
        v_pool: list[torch.Tensor],
        req_to_token: torch.Tensor,
    ) -> torch.Tensor: ...
