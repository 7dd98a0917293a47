"""The engine on triton kernels (the CPU interpreter here) serves `+exp=triton_cpu` -- the
preset the pre-run notice names -- end to end, every token checked by the oracle, and gives
the same greedy tokens as the torch kernels on the same run."""

from __future__ import annotations

from ppx_helpers import outputs

PRESET = ["+exp=triton_cpu", "pp=2", "watch.stall_s=60"]  # a loaded CI box must not call it wedged


def test_triton_preset_serves_and_matches_torch_tokens(engine):
    tri, d_tri = engine(*PRESET)
    ref, d_ref = engine(*PRESET, "engine/kernels=torch")
    assert tri["verdict"] == ref["verdict"] == "served", tri["reason"]
    assert tri["choices"]["kernels"] == "triton" and ref["choices"]["kernels"] == "torch"
    assert tri["oracle_checked"] == tri["served"] == 4 and tri["oracle_mismatches"] == 0
    assert tri["cached_tokens"] > 0  # the shared prefix went through the cached-prefix extend
    assert outputs(d_tri) == outputs(d_ref) and len(outputs(d_tri)) == 4
    assert all(len(ids) == 4 for ids in outputs(d_tri).values())
