"""Weights of a Hugging Face checkpoint, read lazily from safetensors.

A rank asks only for what its stage owns (its layers; the embedding on the first stage; the
final norm and LM head on the last), and in the TP phase only its shard of each matrix:
safetensors' `get_slice` reads those rows / columns from the file and nothing else, so no
rank ever holds the whole model. Tensors come out under ppx's own names (weights.py).
"""

from __future__ import annotations

import json
import os

import torch

from ppx.engine.model.hf_config import HFError, HFSpec

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"

# ppx name -> checkpoint name (per layer), and which axis a TP shard slices
_LAYER = {
    "attn_norm": ("input_layernorm.weight", None),
    "wq": ("self_attn.q_proj.weight", "q_rows"),
    "wk": ("self_attn.k_proj.weight", "kv_rows"),
    "wv": ("self_attn.v_proj.weight", "kv_rows"),
    "wo": ("self_attn.o_proj.weight", "q_cols"),
    "mlp_norm": ("post_attention_layernorm.weight", None),
    "w_gate": ("mlp.gate_proj.weight", "i_rows"),
    "w_up": ("mlp.up_proj.weight", "i_rows"),
    "w_down": ("mlp.down_proj.weight", "i_cols"),
}
_BIAS = {
    "bq": ("self_attn.q_proj.bias", "q_rows"),
    "bk": ("self_attn.k_proj.bias", "kv_rows"),
    "bv": ("self_attn.v_proj.bias", "kv_rows"),
}
EMBED, NORM, LM_HEAD = "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"


def weight_map(path: str) -> dict[str, str]:
    """Tensor name -> file (relative to `path`), from the index of a sharded save or the
    header of a single file."""
    idx = os.path.join(path, INDEX)
    if os.path.exists(idx):
        try:
            with open(idx) as f:
                return dict(json.load(f)["weight_map"])
        except (OSError, ValueError, KeyError) as e:
            raise HFError(f"{idx}: unreadable index ({type(e).__name__}: {e})") from None
    single = os.path.join(path, SINGLE)
    if not os.path.exists(single):
        raise HFError(f"{path}: no {SINGLE} and no {INDEX}")
    from safetensors import safe_open

    with safe_open(single, "pt") as f:
        return {k: SINGLE for k in f.keys()}


def expected_shapes(spec: HFSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor ppx reads from the checkpoint, with its full shape ([out, in])."""
    d = spec.dims
    h, i = d.hidden, d.intermediate
    layer = {
        "attn_norm": (h,),
        "wq": (d.q_size, h),
        "wk": (d.kv_size, h),
        "wv": (d.kv_size, h),
        "wo": (h, d.q_size),
        "mlp_norm": (h,),
        "w_gate": (i, h),
        "w_up": (i, h),
        "w_down": (h, i),
    }
    bias = {"bq": (d.q_size,), "bk": (d.kv_size,), "bv": (d.kv_size,)}
    out = {EMBED: (d.vocab, h), NORM: (h,)}
    if not spec.tied:
        out[LM_HEAD] = (d.vocab, h)
    for li in range(d.layers):
        for n, (hf, _) in _LAYER.items():
            out[f"model.layers.{li}.{hf}"] = layer[n]
        if spec.qkv_bias:
            for n, (hf, _) in _BIAS.items():
                out[f"model.layers.{li}.{hf}"] = bias[n]
    return out


def check_checkpoint(spec: HFSpec) -> None:
    """Headers only (no tensor data): every tensor present, in an existing file, with the
    shape config.json implies. Raises HFError naming the file and the first problem."""
    from safetensors import safe_open

    wm = weight_map(spec.path)
    exp = expected_shapes(spec)
    files = sorted({wm[n] for n in exp if n in wm})
    for n in exp:
        if n not in wm:
            raise HFError(f"{os.path.join(spec.path, INDEX)}: tensor {n} is missing")
    for rel in files:
        full = os.path.join(spec.path, rel)
        if not os.path.exists(full):
            raise HFError(f"{full}: shard file is missing")
        try:
            with safe_open(full, "pt") as f:
                have = set(f.keys())
                for n in (n for n in exp if wm[n] == rel):
                    if n not in have:
                        raise HFError(f"{full}: tensor {n} is missing (the index names it here)")
                    shape = tuple(f.get_slice(n).get_shape())
                    if shape != exp[n]:
                        raise HFError(
                            f"{full}: tensor {n} has shape {list(shape)}, "
                            f"config.json implies {list(exp[n])}"
                        )
        except HFError:
            raise
        except Exception as e:  # safetensors raises its own error types for a corrupt header
            raise HFError(f"{full}: unreadable safetensors ({type(e).__name__}: {e})") from None


class HFWeights:
    """The weight source of one rank; counts the bytes it read (the rank report's
    `weight_bytes`)."""

    def __init__(self, spec: HFSpec) -> None:
        self.spec, self.d = spec, spec.dims
        self.map = weight_map(spec.path)
        self.bytes_read = 0
        self._files: dict[str, object] = {}

    def _file(self, name: str):
        from safetensors import safe_open

        rel = self.map[name]
        if rel not in self._files:
            self._files[rel] = safe_open(os.path.join(self.spec.path, rel), "pt")
        return self._files[rel]

    def _read(self, name: str, axis: str | None, tp_rank: int, tp_size: int) -> torch.Tensor:
        sl = self._file(name).get_slice(name)
        if tp_size == 1 or axis is None:
            t = sl[:]
        else:
            d = self.d
            n = {
                "q": d.q_size,
                "kv": d.kv_size,
                "i": d.intermediate,
            }[axis.split("_")[0]] // tp_size
            a, b = tp_rank * n, (tp_rank + 1) * n
            t = sl[a:b] if axis.endswith("rows") else sl[:, a:b]
        self.bytes_read += t.numel() * t.element_size()
        return t

    def layer(self, li: int, tp_rank: int = 0, tp_size: int = 1) -> dict[str, torch.Tensor]:
        names = dict(_LAYER, **(_BIAS if self.spec.qkv_bias else {}))
        return {
            n: self._read(f"model.layers.{li}.{hf}", ax, tp_rank, tp_size)
            for n, (hf, ax) in names.items()
        }

    def embedding(self) -> torch.Tensor:
        return self._read(EMBED, None, 0, 1)

    def head(self) -> tuple[torch.Tensor, torch.Tensor]:
        lm = self._read(EMBED if self.spec.tied else LM_HEAD, None, 0, 1)
        return self._read(NORM, None, 0, 1), lm

    def close(self) -> None:
        self._files.clear()
