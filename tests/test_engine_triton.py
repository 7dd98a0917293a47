"""The engine on triton kernels (the CPU interpreter here) serves a tiny run end to end and
gives the same greedy tokens as the torch kernels."""

from __future__ import annotations

from ppx_helpers import outputs

TINY = [
    "pp=2",
    "model.layers=2",
    "model.hidden=32",
    "model.heads=4",
    "model.kv_heads=2",
    "model.intermediate=64",
    "workload=random",
    "workload.num_requests=2",
    "workload.concurrency=2",
    "workload.prompt_min=5",
    "workload.prompt_max=7",
    "workload.max_new=3",
    "watch.stall_s=60",
]


def test_triton_engine_matches_torch_tokens(engine):
    tri, d_tri = engine(*TINY, "engine/kernels=triton")
    ref, d_ref = engine(*TINY, "engine/kernels=torch")
    assert tri["verdict"] == ref["verdict"] == "served", tri["reason"]
    assert tri["oracle_mismatches"] == 0 and tri["choices"]["kernels"] == "triton"
    assert outputs(d_tri) == outputs(d_ref) and len(outputs(d_tri)) == 2
