"""The #959 survive run on the hash model, and the carried KV checked against a fresh prefill.

Found at d873dbc: the gallery's #959 green served oracle-clean on model=micro and ended
`mismatch` on model=hash (rid 0 token 0: expected 116, got 44). The carry was right; the
hash model wrote only its local KV head 0, so after a PP->TP carry ranks 1 and 2 read global
heads 4 and 8, which the PP phase had never written. Now every head holds the content
tagged with its global index, and `oracle.carry_check` compares each carried row with what
the reference writes for the same tokens into the new layout. Red arm: a carry that hands
every rank rank 0's head shard -- the hash model's tokens change, and the row check names
the row on the float model too, where the argmax alone would not always tell.
"""

from __future__ import annotations

import re

import pytest
import torch
from ppx_helpers import compose
from test_continuations import B959, SURVIVE

import ppx.engine.carry as carry_mod
from ppx.engine.model.factory import reference

REFUSE = "engine.admission.second_continuation=refuse"


def _survive(model: str) -> list[str]:
    return [o for o in B959 if not o.startswith("model=")] + [f"model={model}", SURVIVE, REFUSE]


@pytest.mark.parametrize("model", ["hash", "micro"])
def test_959_survive_serves_clean_on_hash_and_float_with_the_rows_checked(engine, model):
    s, _ = engine(*_survive(model))
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s
    assert s["carried_at_flip"] == 3, s


@pytest.fixture
def wrong_head_shard(monkeypatch):
    """The planted bug: the PP->TP carry takes heads [0, h) on every rank."""

    def carry(ctx, old, reqs, target, pass_id):
        if target != "tp":
            return real_carry(ctx, old, reqs, target, pass_id)
        saved = ctx.rank
        ctx.rank = 0  # the slice below is taken as rank 0's
        try:
            return real_carry(ctx, old, reqs, target, pass_id)
        finally:
            ctx.rank = saved

    real_carry = carry_mod.carry
    monkeypatch.setattr("ppx.engine.flip_carry.carry", carry)


def test_red_a_wrong_head_shard_changes_hash_tokens_and_is_named_by_the_row_check(
    engine, wrong_head_shard
):
    unchecked, _ = engine(*_survive("hash"), "oracle.carry_check=false")
    assert unchecked["verdict"] == "mismatch" and unchecked["oracle_mismatches"] > 0, unchecked
    checked, _ = engine(*_survive("micro"))
    assert checked["verdict"] == "stopped", checked
    assert re.match(
        r"carried KV differs from a fresh prefill: rank [12] rid \d+ k layer 0 head (4|8) ",
        checked["reason"],
    ), checked


def test_reference_kv_is_what_a_stage_writes():
    """The reference's rows for a stage equal the pool rows a real prefill wrote (hash and
    float), so the check compares like with like."""
    for model in ("hash", "micro"):
        cfg = compose(f"model={model}", "pp=2")
        ref = reference(cfg)
        toks = list(range(3, 3 + 9))
        kv = ref.kv(toks, 0, ref.d.layers // 2, range(0, ref.d.kv_heads))
        assert kv.shape[1:3] == (2, len(toks)), kv.shape
        again = ref.kv(toks[:5], 0, ref.d.layers // 2, range(0, ref.d.kv_heads))
        assert torch.allclose(kv[:, :, :5], again, atol=1e-5)  # causal: a prefix is a prefix


def test_continuations_carried_both_ways_on_the_hash_model_never_crash(engine):
    """TP->PP carries too: the hash model keeps one KV layer per stage whatever the split, so
    a PP stage takes the gathered layer whole. Found by the scenario explorer: with
    flip.continuation=survive and the stopwatch flip, the carry back into PP crashed
    (IndexError in carry.py); now every carry is checked and the stopwatch's churn ends by
    its own named bound, and the drained flip serves."""
    base = [
        "pp=3", "model=hash", "engine.transport=sim", "engine/admission=decision",
        "engine/ordering=decision_first", "flip=every_40_passes", "flip.every_passes=5",
        SURVIVE, "workload=long_prompt", "workload.num_requests=6", "workload.concurrency=6",
        "engine.chunk_size=16",
    ]  # fmt: skip
    clock, _ = engine(*base, "flip.due=clock")
    assert clock["verdict"] == "livelocked" and clock["carried_at_flip"] > 0, clock["reason"]
    assert clock["reason"].startswith("livelock: 32 flips"), clock["reason"]
    drained, _ = engine(*base)
    assert drained["verdict"] == "served" and drained["oracle_mismatches"] == 0, drained
    assert drained["flips"] >= 2, drained
