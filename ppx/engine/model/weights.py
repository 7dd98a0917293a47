"""Deterministic random weights: each tensor from its own seeded generator.

A stage (or a TP shard) builds only what it owns, yet every layout sees the same numbers,
because a tensor's values depend on (seed, layer, name) and never on who asks for it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Dims:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    rope_theta: float
    eps: float
    logit_scale: float

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def q_size(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.kv_heads * self.head_dim


def _gen(seed: int, layer: int, name: str) -> torch.Generator:
    digest = hashlib.blake2b(f"{seed}/{layer}/{name}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & ((1 << 63) - 1))


def tensor(seed: int, layer: int, name: str, shape: tuple[int, ...], std: float) -> torch.Tensor:
    return torch.randn(shape, generator=_gen(seed, layer, name)) * std


def layer_weights(seed: int, layer: int, d: Dims) -> dict[str, torch.Tensor]:
    """Full (unsharded) weights of one decoder layer; matrices are [out, in]."""
    h, inter = d.hidden, d.intermediate
    return {
        "attn_norm": 1.0 + tensor(seed, layer, "attn_norm", (h,), 0.05),
        "wq": tensor(seed, layer, "wq", (d.q_size, h), h**-0.5),
        "wk": tensor(seed, layer, "wk", (d.kv_size, h), h**-0.5),
        "wv": tensor(seed, layer, "wv", (d.kv_size, h), h**-0.5),
        "wo": tensor(seed, layer, "wo", (h, d.q_size), d.q_size**-0.5 * 0.5),
        "mlp_norm": 1.0 + tensor(seed, layer, "mlp_norm", (h,), 0.05),
        "w_gate": tensor(seed, layer, "w_gate", (inter, h), h**-0.5),
        "w_up": tensor(seed, layer, "w_up", (inter, h), h**-0.5),
        "w_down": tensor(seed, layer, "w_down", (h, inter), inter**-0.5 * 0.5),
    }


def embedding(seed: int, d: Dims) -> torch.Tensor:
    return tensor(seed, -1, "embed", (d.vocab, d.hidden), 1.0)


def head(seed: int, d: Dims) -> tuple[torch.Tensor, torch.Tensor]:
    """Final norm and LM head. The head is scaled so logits are peaked: near-ties, where two
    correct runs may part on the last bits of a float, stay rare (see the oracle)."""
    norm = 1.0 + tensor(seed, -2, "final_norm", (d.hidden,), 0.05)
    lm = tensor(seed, -2, "lm_head", (d.vocab, d.hidden), d.logit_scale * d.hidden**-0.5)
    return norm, lm


def shard_layer(
    w: dict[str, torch.Tensor], d: Dims, tp_rank: int, tp_size: int
) -> dict[str, torch.Tensor]:
    """Slice one layer for a TP shard: heads (and KV heads) and MLP columns; the row-parallel
    outputs (wo, w_down) are partial sums that the caller all-reduces."""
    if tp_size == 1:
        return w
    hd = d.head_dim
    qh, kvh, inter = d.heads // tp_size, d.kv_heads // tp_size, d.intermediate // tp_size
    q0, k0, i0 = tp_rank * qh * hd, tp_rank * kvh * hd, tp_rank * inter
    return {
        "attn_norm": w["attn_norm"],
        "wq": w["wq"][q0 : q0 + qh * hd],
        "wk": w["wk"][k0 : k0 + kvh * hd],
        "wv": w["wv"][k0 : k0 + kvh * hd],
        "wo": w["wo"][:, q0 : q0 + qh * hd],
        "mlp_norm": w["mlp_norm"],
        "w_gate": w["w_gate"][i0 : i0 + inter],
        "w_up": w["w_up"][i0 : i0 + inter],
        "w_down": w["w_down"][:, i0 : i0 + inter],
    }


class RandomWeights:
    """The seeded random model as a weight source (the same interface as hf_weights.HFWeights:
    `layer`, `embedding`, `head`), so a stage builds from either without knowing which."""

    bytes_read = 0  # nothing is read from disk

    def __init__(self, d: Dims, seed: int) -> None:
        self.d, self.seed = d, seed

    def layer(self, li: int, tp_rank: int = 0, tp_size: int = 1) -> dict[str, torch.Tensor]:
        return shard_layer(layer_weights(self.seed, li, self.d), self.d, tp_rank, tp_size)

    def embedding(self) -> torch.Tensor:
        return embedding(self.seed, self.d)

    def head(self) -> tuple[torch.Tensor, torch.Tensor]:
        return head(self.seed, self.d)
