"""Tiny Hugging Face checkpoints built in the tests (transformers, dev extra) and
transformers' own greedy generation as the independent cross-check."""

from __future__ import annotations

import importlib.util
import json
import os

from ppx_helpers import ROOT

PROMPTS = [
    "the quick brown fox jumps over the lazy dog",
    "every rank reads only its own tensors",
    "hello world this is a tiny model",
    "a pipeline stage runs a slice of the layers and tokens flow back",
    "the lazy dog",
    "tokens flow from the first rank to the last",
]


def builder():
    """scripts/make_tiny_checkpoint.py as a module (the same builder the README uses)."""
    path = os.path.join(ROOT, "scripts", "make_tiny_checkpoint.py")
    spec = importlib.util.spec_from_file_location("make_tiny_checkpoint", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_jsonl(path: str, prompts: list[str] = PROMPTS, max_new: int = 8) -> str:
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"prompt": p, "max_new": max_new}) + "\n")
    return path


def encode(ckpt: str, text: str) -> list[int]:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json")).encode(text).ids


def hf_greedy(ckpt: str, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    """transformers' greedy `generate`, one prompt at a time (stops at the checkpoint's EOS)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    out = []
    for ids in prompts:
        with torch.no_grad():
            g = model.generate(
                torch.tensor([ids]), max_new_tokens=max_new, do_sample=False, top_k=None, top_p=None
            )
        out.append(g[0, len(ids) :].tolist())
    return out
