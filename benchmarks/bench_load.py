"""Checkpoint loading per stage vs the whole model: each rank of a pp-way split reads only its
own tensors from a sharded safetensors checkpoint, so its load time should approach 1/pp of
one process loading everything. Interleaved reps, medians, printed side by side.

    python benchmarks/bench_load.py [--pp 3] [--reps 5] [--ckpt DIR]

Without --ckpt a synthetic sharded Llama checkpoint (~150 MB fp32, one shard per layer) is
written to a temp dir with safetensors alone (no transformers needed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import _common  # noqa: F401 - puts the repo on sys.path

DIMS = dict(vocab=8192, hidden=512, layers=12, heads=8, kv_heads=4, intermediate=1536)


def write_checkpoint(path: str, d: dict = DIMS) -> str:
    import torch
    from safetensors.torch import save_file

    from ppx.engine.model.hf_config import HFSpec
    from ppx.engine.model.hf_weights import expected_shapes
    from ppx.engine.model.weights import Dims

    os.makedirs(path, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": d["vocab"],
        "hidden_size": d["hidden"],
        "num_hidden_layers": d["layers"],
        "num_attention_heads": d["heads"],
        "num_key_value_heads": d["kv_heads"],
        "intermediate_size": d["intermediate"],
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "torch_dtype": "float32",
        "tie_word_embeddings": False,
        "max_position_embeddings": 2048,
    }
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    dims = Dims(*(d[k] for k in DIMS), 10000.0, 1e-5, 1.0)
    spec = HFSpec(path, "LlamaForCausalLM", dims, False, False, "float32", (), 2048)
    shards: dict[str, dict] = {}
    for name, shape in expected_shapes(spec).items():
        part = name.split(".")[2] if name.startswith("model.layers.") else "rest"
        shards.setdefault(part, {})[name] = torch.randn(shape) * 0.02
    weight_map = {}
    for i, (_part, tensors) in enumerate(sorted(shards.items())):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, os.path.join(path, fn))
        weight_map.update({n: fn for n in tensors})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return path


def load_s(cfg, rank: int, world: int) -> tuple[float, int]:
    from ppx.engine.kernels.registry import get_kernels
    from ppx.engine.model.factory import build_stage

    t = time.perf_counter()
    m = build_stage(cfg, "pp", rank, world, get_kernels("torch"), "cpu")
    return time.perf_counter() - t, m.bytes_read


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pp", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ckpt", default=None)
    a = ap.parse_args()
    path = a.ckpt or write_checkpoint(tempfile.mkdtemp(prefix="ppx-bench-ckpt-"))
    cfg = _common.compose("model=hf", f"model.path={path}", f"pp={a.pp}")
    load_s(cfg, 0, 1)  # warm the page cache: every timed read below comes from memory
    whole: list[float] = []
    stages: list[list[float]] = [[] for _ in range(a.pp)]
    nbytes = [0] * (a.pp + 1)
    for _ in range(a.reps):  # interleaved: whole, stage 0..pp-1, whole, ...
        t, nbytes[a.pp] = load_s(cfg, 0, 1)
        whole.append(t)
        for r in range(a.pp):
            t, nbytes[r] = load_s(cfg, r, a.pp)
            stages[r].append(t)
    w = statistics.median(whole)
    print(f"checkpoint {path} (pp={a.pp}, reps={a.reps}, medians)")
    print(f"{'loader':<10}{'MB read':>10}{'load ms':>10}{'ratio':>8}")
    print(f"{'whole':<10}{nbytes[a.pp] / 1e6:>10.1f}{w * 1e3:>10.1f}{1.0:>8.2f}")
    for r in range(a.pp):
        m = statistics.median(stages[r])
        print(f"{'rank' + str(r):<10}{nbytes[r] / 1e6:>10.1f}{m * 1e3:>10.1f}{m / w:>8.2f}")
    print(f"1/pp = {1 / a.pp:.2f}")
    if a.ckpt is None:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
