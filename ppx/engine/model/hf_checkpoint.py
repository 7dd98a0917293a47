"""A Hugging Face checkpoint checked and folded into the config's model section, before any
spawn (validation): config.json gives the shape, the safetensors headers are checked."""

from __future__ import annotations

import os

from ppx.engine.model.hf_config import HFError, HFSpec, load_spec
from ppx.engine.model.hf_weights import check_checkpoint


def resolve(model) -> HFSpec:
    """Fill a config's model section from `model.path` (validation, before any spawn): the
    dims come from config.json, `model.dtype=auto` becomes the checkpoint's dtype, and the
    checkpoint's headers are checked (every tensor present with the shape the config implies)."""
    if model.path is None:
        raise HFError("model=hf needs model.path=DIR (a Hugging Face model directory)")
    spec = load_spec(str(model.path))
    check_checkpoint(spec)
    d = spec.dims
    for key in ("vocab", "hidden", "layers", "heads", "kv_heads", "intermediate"):
        setattr(model, key, getattr(d, key))
    model.rope_theta, model.eps, model.logit_scale = d.rope_theta, d.eps, 1.0
    if model.dtype == "auto":
        model.dtype = spec.dtype
    if spec.max_positions and model.max_context > spec.max_positions:
        raise HFError(
            f"model.max_context={model.max_context} > max_position_embeddings="
            f"{spec.max_positions} in {os.path.join(spec.path, 'config.json')}"
        )
    return spec
