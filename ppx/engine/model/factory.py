"""Which model a config means: the seeded random decoder (default), a Hugging Face
checkpoint (`model=hf model.path=DIR`) or the protocol-speed hash model (`model=hash`,
hashed.py). The planner, the oracle and the benchmarks build stages and references only
through here."""

from __future__ import annotations

import torch

from ppx.engine.model.hashed import HashReference, HashStage
from ppx.engine.model.kinds import MODELS
from ppx.engine.model.llama import Reference, StageModel
from ppx.engine.model.weights import RandomWeights
from ppx.engine.shapes import dims_of


def is_hash(cfg) -> bool:
    return MODELS.of(cfg).hashed


def is_hf(cfg) -> bool:
    return cfg.model.path is not None


def weight_source(cfg):
    if is_hf(cfg):
        from ppx.engine.model.hf_config import load_spec
        from ppx.engine.model.hf_weights import HFWeights

        return HFWeights(load_spec(str(cfg.model.path)))
    return RandomWeights(dims_of(cfg), int(cfg.seed))


def stage_range(layers: int, phase: str, rank: int, world: int) -> tuple[int, int]:
    """PP phase: rank r runs a contiguous slice of layers; TP phase: every layer."""
    if phase == "tp":
        return 0, layers
    per = layers // world
    return rank * per, (rank + 1) * per


def build_stage(
    cfg, phase: str, rank: int, world: int, kernels, device: str, all_reduce=None
) -> StageModel | HashStage:
    """This rank's model for `phase`; reads only the tensors the stage (or TP shard) owns."""
    d = dims_of(cfg)
    first, last = stage_range(d.layers, phase, rank, world)
    if is_hash(cfg):
        size = world if phase == "tp" else 1
        return HashStage(
            d,
            int(cfg.seed),
            first,
            last,
            int(cfg.model.max_context),
            size,
            all_reduce,
            tp_rank=rank if phase == "tp" else 0,
        )
    tp = dict(tp_rank=rank, tp_size=world, all_reduce=all_reduce) if phase == "tp" else {}
    src = weight_source(cfg)
    return StageModel(
        d, int(cfg.seed), first, last, kernels, device, getattr(torch, cfg.model.dtype),
        source=src, **tp,
    )  # fmt: skip


def reference(cfg) -> Reference | HashReference:
    """The whole model in one process (fp32): the oracle's ground truth."""
    if is_hash(cfg):
        return HashReference(dims_of(cfg), int(cfg.seed), int(cfg.model.max_context))
    return Reference(dims_of(cfg), int(cfg.seed), weight_source(cfg))


def model_key(cfg) -> tuple:
    """What identifies the weights (the explorer shares built models across runs by it)."""
    m = cfg.model
    return (m.name, m.path, int(cfg.seed), dims_of(cfg), m.dtype, m.max_context)


def eos_ids(cfg) -> frozenset[int]:
    """A checkpoint's EOS ids (config.json + generation_config.json); none for the random model."""
    if not is_hf(cfg):
        return frozenset()
    from ppx.engine.model.hf_config import load_spec

    return frozenset(load_spec(str(cfg.model.path)).eos)
