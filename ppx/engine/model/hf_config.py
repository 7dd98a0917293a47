"""A Hugging Face model directory's config.json, read without `transformers`.

Only what ppx's decoder computes is accepted: the Llama family (LlamaForCausalLM,
MistralForCausalLM without a sliding window) and Qwen2ForCausalLM -- RMSNorm, NeoX RoPE with
plain `rope_theta`, GQA, SwiGLU, optional q/k/v bias, tied or untied embeddings. Anything
else is refused with one line naming what is unsupported, before any rank is spawned.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ppx.engine.model.weights import Dims

ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")
DTYPES = ("float32", "bfloat16", "float16")


class HFError(ValueError):
    """A checkpoint ppx cannot serve; the message names the file and the problem."""


@dataclass(frozen=True)
class HFSpec:
    path: str
    arch: str
    dims: Dims
    qkv_bias: bool
    tied: bool
    dtype: str  # the checkpoint's own dtype (config `torch_dtype` / `dtype`)
    eos: tuple[int, ...]
    max_positions: int


def _rope_theta(c: dict, where: str) -> float:
    # transformers >= 5 writes `rope_parameters`; older checkpoints `rope_theta` + `rope_scaling`
    for key in ("rope_parameters", "rope_scaling"):
        rp = c.get(key)
        if not rp:
            continue
        kind = rp.get("rope_type", rp.get("type", "default"))
        if kind != "default":
            raise HFError(
                f"{where}: {key} rope_type={kind!r} is not supported (only plain rope_theta)"
            )
        if "rope_theta" in rp:
            return float(rp["rope_theta"])
    return float(c.get("rope_theta", 10000.0))


def _eos(path: str, c: dict) -> tuple[int, ...]:
    ids: set[int] = set()
    sources = [c]
    gen = os.path.join(path, "generation_config.json")
    if os.path.exists(gen):
        with open(gen) as f:
            sources.append(json.load(f))
    for s in sources:
        e = s.get("eos_token_id")
        if isinstance(e, int):
            ids.add(e)
        elif isinstance(e, list):
            ids |= {int(x) for x in e}
    return tuple(sorted(ids))


def load_spec(path: str) -> HFSpec:
    """Parse and check `path/config.json`; raises HFError naming the file and the problem."""
    where = os.path.join(path, "config.json")
    if not os.path.isdir(path):
        raise HFError(f"model.path={path}: not a directory")
    if not os.path.exists(where):
        raise HFError(f"{where}: missing (a Hugging Face model directory has one)")
    try:
        with open(where) as f:
            c = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise HFError(f"{where}: unreadable JSON ({e})") from None
    archs = c.get("architectures") or []
    if len(archs) != 1 or archs[0] not in ARCHITECTURES:
        raise HFError(
            f"{where}: architecture {archs or c.get('model_type')} is not supported "
            f"(supported: {', '.join(ARCHITECTURES)})"
        )
    arch = archs[0]
    act = c.get("hidden_act", "silu")
    if act != "silu":
        raise HFError(f"{where}: hidden_act={act!r} is not supported (only silu)")
    for key in ("attention_bias", "mlp_bias"):
        if c.get(key):  # Llama's attention_bias also biases o_proj, which ppx does not compute
            raise HFError(f"{where}: {key}=true is not supported")
    if arch == "MistralForCausalLM" and c.get("sliding_window"):
        raise HFError(f"{where}: sliding_window={c['sliding_window']} is not supported")
    if arch == "Qwen2ForCausalLM" and c.get("use_sliding_window"):
        raise HFError(f"{where}: use_sliding_window=true is not supported")
    try:
        hidden, heads = int(c["hidden_size"]), int(c["num_attention_heads"])
        dims = Dims(
            vocab=int(c["vocab_size"]),
            hidden=hidden,
            layers=int(c["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(c.get("num_key_value_heads") or heads),
            intermediate=int(c["intermediate_size"]),
            rope_theta=_rope_theta(c, where),
            eps=float(c.get("rms_norm_eps", 1e-6)),
            logit_scale=1.0,
        )
    except KeyError as e:
        raise HFError(f"{where}: missing key {e.args[0]!r}") from None
    hd = c.get("head_dim")
    if hd is not None and int(hd) * heads != hidden:
        raise HFError(
            f"{where}: head_dim={hd} != hidden_size/num_attention_heads={hidden // heads} "
            "is not supported"
        )
    dtype = str(c.get("torch_dtype") or c.get("dtype") or "float32").removeprefix("torch.")
    return HFSpec(
        path=path,
        arch=arch,
        dims=dims,
        qkv_bias=arch == "Qwen2ForCausalLM",
        tied=bool(c.get("tie_word_embeddings", False)),
        dtype=dtype if dtype in DTYPES else "float32",
        eos=_eos(path, c),
        max_positions=int(c.get("max_position_embeddings") or 0),
    )
