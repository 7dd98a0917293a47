"""`model=hash`: the protocol-speed model reads every token back through the request's KV
mapping, so a wrong mapping changes a token (the red arms, one per way a mapping goes wrong),
its tokens do not depend on pp or the TP phase, and the oracle checks it unchanged."""

from __future__ import annotations

import random

import pytest
import torch
from ppx_helpers import QUEUE_ORDER, compose, outputs

from ppx.core import ForwardInputs
from ppx.engine.model.factory import build_stage, reference

SEQS = 3
LEN = 12


def setup(pp: int, tp: int = 1, all_reduce=None):
    cfg = compose("model=hash", f"pp={pp}")
    phase = "tp" if tp > 1 else "pp"
    stages = [build_stage(cfg, phase, r, pp, None, "cpu", all_reduce) for r in range(pp)]
    rng = random.Random(3)
    seqs = [[rng.randrange(128) for _ in range(LEN)] for _ in range(SEQS)]
    # every stage its own pool and mapping, as every rank has
    r2t = torch.zeros(4, 64, dtype=torch.int32)
    slots = list(range(SEQS * LEN))
    random.Random(4).shuffle(slots)  # pool slots in no particular order, as after evictions
    for b in range(SEQS):
        r2t[b, :LEN] = torch.tensor(slots[b * LEN : (b + 1) * LEN])
    heads = 12 // tp  # a TP shard holds its share of the KV heads
    pools = [
        ([torch.zeros(64, heads, 1)], [torch.zeros(64, heads, 1)], r2t.clone()) for _ in stages
    ]
    return cfg, stages, pools, seqs


def step(stages, pools, seqs, start: int, end: int) -> list[int]:
    """Positions start..end-1 of every sequence through the stages (a prefill from 0, or a
    decode of one token over the prefix already in the pools); the sampled next ids. Every
    stage resolves slots through its own req_to_token, as every rank does."""
    x, n = None, end - start
    for s, (k, v, r2t) in zip(stages, pools, strict=True):
        fi = ForwardInputs(
            "prefill" if start == 0 else "decode",
            torch.tensor([p for _ in seqs for p in range(start, end)]),
            torch.arange(0, SEQS * n + 1, n),
            torch.full((SEQS,), start),
            torch.arange(SEQS),
            torch.cat([r2t[b, start:end].long() for b in range(SEQS)]),
            torch.arange(n - 1, SEQS * n, n),
            input_ids=torch.tensor([t for q in seqs for t in q[start:end]]) if s.is_first else None,
            hidden=x,
        )
        x = s.forward(fi, k, v, r2t)
    return x.tolist()


def serve(pp: int, tamper=None) -> tuple[list[int], list[int]]:
    """Prefill all but the last token, let `tamper(k, v, req_to_token)` spoil rank 1's KV
    (the middle stage at pp=3), then decode the last token: (tokens, reference tokens)."""
    cfg, stages, pools, seqs = setup(pp)
    step(stages, pools, seqs, 0, LEN - 1)
    if tamper is not None:
        tamper(*pools[1])
    ref = reference(cfg)
    return step(stages, pools, seqs, LEN - 1, LEN), [int(ref.next_ids(q)[-1]) for q in seqs]


@pytest.mark.parametrize("pp", [1, 3])
def test_stages_give_the_reference_tokens_whatever_pp(pp):
    cfg, stages, pools, seqs = setup(pp)
    ref = reference(cfg)
    assert step(stages, pools, seqs, 0, LEN) == [int(ref.next_ids(q)[-1]) for q in seqs]
    got, want = serve(pp)  # prefill then decode over the cached prefix: the same ids
    assert got == want
    # the reference's logits are one-hot at the same ids: the oracle's margin is 1
    logits = ref.logits(seqs[0])
    assert logits.argmax(-1)[-1] == want[0] and float(logits.max()) == 1.0 == logits[-1].sum()


def swap_two_slots(k, v, r2t):
    r2t[0, 2], r2t[0, 5] = int(r2t[0, 5]), int(r2t[0, 2])


def another_requests_row(k, v, r2t):
    r2t[0] = r2t[1]


def same_id_other_history(k, v, r2t):
    v[0][int(r2t[0, 4])] += 1  # the prefix hash a slot holds is stale; its id is right


def another_id(k, v, r2t):
    slot = int(r2t[0, 4])
    k[0][slot] = (k[0][slot] + 1) % 128


@pytest.mark.parametrize(
    "tamper", [swap_two_slots, another_requests_row, same_id_other_history, another_id]
)
def test_every_wrong_kv_read_on_one_rank_changes_the_token(tamper):
    got, want = serve(3)
    assert got == want  # green: the same decode through an untouched mapping
    got, want = serve(3, tamper)
    assert got[0] != want[0], f"{tamper.__name__} on rank 1 left request 0's token unchanged"
    assert got[1:] == want[1:]  # only the spoiled request's token moved


def test_the_tp_phase_averages_every_shards_own_hash():
    _, stages, pools, seqs = setup(1)
    want = step(stages, pools, seqs, 0, LEN)
    # TP rank 0 runs every layer; the all-reduce sums the shards' hashes
    _, tp, tpools, _ = setup(2, tp=2, all_reduce=lambda f: f * 2)  # two shards that agree
    assert step(tp[:1], tpools[:1], seqs, 0, LEN) == want
    _, tp, tpools, _ = setup(2, tp=2, all_reduce=lambda f: f * 2 + 1)  # one shard differs
    assert step(tp[:1], tpools[:1], seqs, 0, LEN) != want


SMALL = ["model=hash", "workload.num_requests=6", "workload.max_new=5", "engine.transport=sim"]


def test_engine_runs_serve_the_oracles_tokens_on_sim_and_gloo(engine):
    sim, sim_dir = engine(*SMALL, "pp=3")
    gloo, gloo_dir = engine(*SMALL[:-1], "pp=3")
    for s in (sim, gloo):
        assert (s["verdict"], s["served"], s["oracle_mismatches"]) == ("served", 6, 0), s["reason"]
    assert outputs(sim_dir) == outputs(gloo_dir)
    flips, _ = engine(
        *SMALL, "pp=2", "flip=every_40_passes", "flip.every_passes=6", "engine/guard=rid",
        "engine/admission=decision", "engine/ordering=decision_first",
    )  # fmt: skip
    assert flips["verdict"] == "served" and flips["oracle_mismatches"] == 0, flips["reason"]
    assert flips["flips"] >= 2


def test_the_oracle_sees_a_corrupt_token_and_permuted_rows(engine):
    bad, _ = engine(*SMALL, "pp=3", "faults=corrupt_token")
    assert bad["verdict"] == "mismatch" and "rid 0 token 1" in bad["reason"], bad["reason"]
    order = [*QUEUE_ORDER, "workload.max_new=4"]
    red, _ = engine(*SMALL, *order, "engine.admission.batch_order=queue")
    green, _ = engine(*SMALL, *order, "engine.admission.batch_order=decision")
    assert red["verdict"] == "mismatch" and red["reason"].startswith("oracle: rid"), red["reason"]
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
