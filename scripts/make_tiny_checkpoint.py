"""Build a tiny Hugging Face checkpoint directory ppx can serve (`model=hf model.path=DIR`).

    python scripts/make_tiny_checkpoint.py DIR [--arch llama|qwen2] [--tied] [--shard 40KB]

Random weights (transformers' own init, widened so greedy choices are not near-ties) saved
with `save_pretrained` as safetensors -- sharded with an index when --shard is given -- plus
a WordLevel tokenizer trained on a few sentences with `tokenizers` (tokenizer.json) and a
tokenizer_config.json with a small chat template. Needs the dev extra (transformers).
"""

from __future__ import annotations

import argparse
import json
import os

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a pipeline stage runs a slice of the layers",
    "every rank reads only its own tensors",
    "tokens flow from the first rank to the last and back",
    "hello world this is a tiny model",
    "user : assistant : system :",
]
SPECIALS = ["<unk>", "<s>", "</s>"]
CHAT = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant :{% endif %}"
)
DIMS = dict(
    vocab_size=64,
    hidden_size=96,
    num_hidden_layers=6,  # pp = 1, 2, 3 split it
    num_attention_heads=12,
    num_key_value_heads=6,  # GQA; heads and KV heads shard over the TP phase of pp = 2, 3
    intermediate_size=96,
    max_position_embeddings=512,
    rope_theta=10000.0,
    rms_norm_eps=1e-5,
)


def train_tokenizer(out_dir: str) -> int:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=SPECIALS))
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "chat_template": CHAT}, f)
    return tok.get_vocab_size()


def build(
    out_dir: str,
    arch: str = "llama",
    tied: bool = False,
    shard: str | None = None,
    seed: int = 0,
    init_std: float = 0.15,
    **overrides,
) -> str:
    """Write the checkpoint + tokenizer to `out_dir`; returns it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    os.makedirs(out_dir, exist_ok=True)
    n_tok = train_tokenizer(out_dir)
    dims = dict(DIMS, **overrides)
    assert n_tok <= dims["vocab_size"], (n_tok, dims["vocab_size"])
    cls_cfg, cls_model = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[arch]
    cfg = cls_cfg(
        **dims,
        tie_word_embeddings=tied,
        bos_token_id=1,
        eos_token_id=2,
        initializer_range=init_std,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = cls_model(cfg).eval()
    with torch.no_grad():  # norms and biases away from their trivial init, so they matter
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif n.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    kw = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(out_dir, **kw)
    return out_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--arch", choices=["llama", "qwen2"], default="llama")
    ap.add_argument("--tied", action="store_true", help="tie the LM head to the embedding")
    ap.add_argument("--shard", default=None, help="max_shard_size, e.g. 40KB (sharded + index)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    build(a.dir, a.arch, a.tied, a.shard, a.seed)
    print(f"wrote {a.dir}: python -m ppx.run +exp=smoke model=hf model.path={a.dir}")


if __name__ == "__main__":
    main()
