"""model=hf: ppx's greedy tokens on a tiny transformers-saved checkpoint equal transformers'
own greedy `generate`, at pp = 1, 2, 3 and across TP<->PP flips; each rank reads only its own
stage (or TP shard) from safetensors."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest

pytest.importorskip("transformers")  # the cross-check is the dev extra's

from hf_fixtures import PROMPTS, builder, encode, hf_greedy, write_jsonl  # noqa: E402

MAX_NEW = 8


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """A sharded untied Llama (GQA) and a single-file tied Qwen2 (q/k/v bias)."""
    root = tmp_path_factory.mktemp("hf")
    b = builder()
    llama = b.build(str(root / "llama"), "llama", tied=False, shard="40KB")
    qwen = b.build(str(root / "qwen2"), "qwen2", tied=True, seed=1)
    expected = {}
    for name, path in (("llama", llama), ("qwen2", qwen)):
        ids = [encode(path, p) for p in PROMPTS]
        expected[name] = hf_greedy(path, ids, MAX_NEW)
    return {"llama": llama, "qwen2": qwen, "expected": expected, "root": root}


def _outputs(run_dir: str) -> pd.DataFrame:
    return pd.read_parquet(os.path.join(run_dir, "requests.parquet")).set_index("rid")


def _serve(engine, ckpt: str, pp: int, transport: str, *extra: str):
    jl = write_jsonl(os.path.join(os.path.dirname(ckpt), f"p_{os.path.basename(ckpt)}.jsonl"))
    return engine(
        "model=hf",
        f"model.path={ckpt}",
        "workload=jsonl",
        f"workload.path={jl}",
        "workload.concurrency=3",
        f"pp={pp}",
        f"engine.transport={transport}",
        "engine.chunk_size=8",  # prompts cross chunks
        *extra,
    )


@pytest.mark.parametrize(
    "arch,pp,transport",
    [("llama", 1, "sim"), ("llama", 2, "gloo"), ("llama", 3, "sim"), ("qwen2", 3, "gloo")],
)
def test_greedy_equals_transformers(engine, ckpts, arch, pp, transport):
    s, d = _serve(engine, ckpts[arch], pp, transport)
    assert s["verdict"] == "served", s["reason"]
    assert s["served"] == len(PROMPTS) and s["oracle_mismatches"] == 0
    df = _outputs(d)
    got = [list(df.loc[i, "output_ids"]) for i in range(len(PROMPTS))]
    assert got == ckpts["expected"][arch]
    # text columns: the prompt as given, the output as the tokenizer decodes it
    assert df.loc[0, "prompt_text"] == PROMPTS[0]
    assert isinstance(df.loc[0, "output_text"], str) and df.loc[0, "output_text"]


@pytest.mark.parametrize("arch,pp,transport", [("llama", 2, "gloo"), ("qwen2", 3, "sim")])
def test_greedy_equals_transformers_across_flips(engine, ckpts, arch, pp, transport):
    s, d = _serve(engine, ckpts[arch], pp, transport, "flip=every_40_passes", "flip.every_passes=6")
    assert s["verdict"] == "served", s["reason"]
    assert s["flips"] >= 2, s["flips"]
    df = _outputs(d)
    got = [list(df.loc[i, "output_ids"]) for i in range(len(PROMPTS))]
    assert got == ckpts["expected"][arch]


def test_each_rank_reads_only_its_stage(engine, ckpts):
    """Rank reports: the stages' reads add up to the checkpoint once, each rank a third."""
    from safetensors import safe_open

    path = ckpts["llama"]
    total = 0
    for f in os.listdir(path):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(path, f), "pt") as st:
                total += sum(st.get_tensor(k).nbytes for k in st.keys())
    s, d = _serve(engine, path, 3, "gloo")
    assert s["verdict"] == "served", s["reason"]
    reads = []
    for r in range(3):
        with open(os.path.join(d, "ranks", f"rank{r}.json")) as f:
            rep = json.load(f)
        reads.append(rep["weight_bytes_read"])
        assert rep["weight_bytes"]["pp"] > 0
    assert sum(reads) == total, (reads, total)
    assert max(reads) < 0.5 * total


def test_tp_shards_read_only_their_slices(ckpts):
    """The TP phase reads each matrix's own rows / columns (safetensors get_slice): the
    shards of a layer add up to the layer exactly once, and equal its slices."""
    import torch

    from ppx.engine.model.hf_config import load_spec
    from ppx.engine.model.hf_weights import HFWeights
    from ppx.engine.model.weights import shard_layer

    spec = load_spec(ckpts["qwen2"])
    full = HFWeights(spec).layer(2)
    for world in (2, 3):
        srcs = [HFWeights(spec) for _ in range(world)]
        shards = [src.layer(2, r, world) for r, src in enumerate(srcs)]
        norms = 2 * full["attn_norm"].nbytes  # every shard holds both norms whole
        layer_bytes = sum(t.nbytes for t in full.values())
        assert sum(s.bytes_read for s in srcs) == layer_bytes + (world - 1) * norms
        for r, sh in enumerate(shards):
            want = shard_layer(full, spec.dims, r, world)
            for n in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"):
                assert torch.equal(sh[n], want[n]), n
            assert torch.equal(
                sh["bk"], full["bk"][r * sh["bk"].numel() : (r + 1) * sh["bk"].numel()]
            )


def test_cross_check_can_fail(ckpts):
    """Red arm: the same checkpoint with Qwen2's q/k/v bias dropped no longer matches
    transformers -- the comparison above is able to see a wrong model."""
    from ppx.engine.model.hf_config import load_spec
    from ppx.engine.model.hf_weights import HFWeights
    from ppx.engine.model.llama import Reference

    path = ckpts["qwen2"]
    spec = load_spec(path)
    prompts = [encode(path, p) for p in PROMPTS]
    good = Reference(spec.dims, 0, HFWeights(spec))
    assert [
        good.greedy(p, MAX_NEW)[: len(e)] for p, e in zip(prompts, ckpts["expected"]["qwen2"])
    ] == [e[:MAX_NEW] for e in ckpts["expected"]["qwen2"]]
    bad = Reference(spec.dims, 0, HFWeights(spec))
    for w in bad.layers:
        for b in ("bq", "bk", "bv"):
            w.pop(b)
    got = [bad.greedy(p, MAX_NEW) for p in prompts]
    assert got != ckpts["expected"]["qwen2"]


def test_eos_ends_a_request(engine, ckpts, tmp_path):
    """A checkpoint whose EOS is the first token transformers generates for prompt 0: ppx
    stops that request after one token, exactly as `generate` does; without EOS (red arm,
    the original checkpoint) the same request runs to max_new."""
    src = ckpts["llama"]
    first = ckpts["expected"]["llama"][0][0]
    dst = str(tmp_path / "eos")
    shutil.copytree(src, dst)
    for name in ("config.json", "generation_config.json"):
        p = os.path.join(dst, name)
        with open(p) as f:
            c = json.load(f)
        c["eos_token_id"] = first
        with open(p, "w") as f:
            json.dump(c, f)
    expected = hf_greedy(dst, [encode(dst, PROMPTS[0])], MAX_NEW)[0]
    assert expected == [first]
    s, d = _serve(engine, dst, 2, "sim")
    assert s["verdict"] == "served", s["reason"]
    assert list(_outputs(d).loc[0, "output_ids"]) == [first]
    assert len(ckpts["expected"]["llama"][0]) == MAX_NEW  # the red arm: no EOS, full length


def test_bf16_stage_against_the_fp32_reference(engine, ckpts):
    """dtype from model.dtype: a bf16 run of the fp32 checkpoint passes the oracle at the
    low-precision near-tie margin (green) and fails it at float32's 1e-3 (red)."""
    s, _ = _serve(engine, ckpts["llama"], 2, "sim", "model.dtype=bfloat16")
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s["reason"]
    s, _ = _serve(engine, ckpts["llama"], 2, "sim", "model.dtype=bfloat16", "oracle.tol=1e-4")
    assert s["verdict"] == "mismatch" and s["oracle_mismatches"] >= 1
