"""The model kinds `model.name` names (conf/model/*.yaml), each with what the planner, the
oracle and validation need to know of it; no one compares the name with a string."""

from __future__ import annotations

from dataclasses import dataclass

from ppx.switch import Switch


@dataclass(frozen=True)
class ModelKind:
    hashed: bool = False  # the protocol-speed hash model (hashed.py), not a decoder
    checkpoint: bool = False  # a Hugging Face checkpoint directory fills the shape (model.path)


DECODER = ModelKind()  # the seeded random Llama decoder, at the preset's shape

MODELS: Switch[ModelKind] = Switch(
    "model.name",
    {
        "tiny": DECODER,
        "micro": DECODER,
        "interp": DECODER,
        "hash": ModelKind(hashed=True),
        "hf": ModelKind(checkpoint=True),
    },
)
