"""Bad input: one clear error line naming the key, exit non-zero, nothing spawned."""

from __future__ import annotations

import os

import pytest

CASES = [
    (["engine.chunk_sise=8"], "chunk_sise"),
    (["engine/admission=decison"], "decison"),
    (["model.layers=10", "pp=3"], "model.layers=10 is not divisible by pp=3"),
    (["tp=5"], "model.heads=24 is not divisible by tp=5"),
    (["engine.chunk_size=0"], "engine.chunk_size must be positive"),
    (["+engine.kv.bogus=1"], "bogus"),
    (["engine.kv.pool_per_rank=[64,64]", "pp=3"], "pool_per_rank has 2 entries for pp=3"),
    (["engine.ordering.steps=[chain,schedule,lanuch,output,flush]"], "lanuch"),
    (
        ["engine.transport=nccl"],
        "engine.transport=nccl needs device=cuda and one CUDA device per rank",
    ),
    # protocol switches a policy ignores, or that mean nothing together (issue 14)
    (
        [
            "engine/admission=decision",
            "engine/ordering=decision_first",
            "engine.admission.on_refusal=stop",
        ],
        "engine.admission.on_refusal=stop is ignored by engine/admission=decision",
    ),
    (["engine.admission.on_refusal=void"], "ignored by engine/admission=rank_local"),
    (["engine/guard=rid", "engine.guard.prefix_clear=never"], "needs engine/guard=prefix"),
    (["engine.guard.miss=none"], "engine.guard.miss='none': sentinel | zero"),
    (
        [
            "engine/admission=decision",
            "engine/ordering=decision_first",
            "engine.admission.told_scope=promise",
        ],
        "told_scope=promise means nothing without flips",
    ),
    (
        [
            "engine/admission=forwarded",
            "engine/ordering=decision_first",
            "engine.admission.geometry=rederive",
        ],
        "executes rank 0's lengths by definition",
    ),
    (
        [
            "engine/admission=row_authority",
            "engine/ordering=decision_first",
            "engine.admission.on_refusal=void",
        ],
        "row_authority never voids",
    ),
    (
        ["engine/admission=row_authority", "engine/ordering=decision_first", "engine/guard=rid"],
        "learns from retractions",
    ),
]


@pytest.mark.parametrize("overrides,needle", CASES)
def test_bad_config_is_one_clear_error(ppx_run, overrides, needle):
    proc, summary, run_dir = ppx_run(*overrides)
    assert proc.returncode != 0
    assert needle in proc.stderr, proc.stderr
    assert summary is None
    assert not os.path.exists(os.path.join(run_dir, "ranks")), "a rank was spawned for a bad config"


def test_good_config_validates():
    from omegaconf import OmegaConf

    from ppx.config import validate

    cfg = validate(
        OmegaConf.create(
            {
                "pp": 4,
                "engine": {
                    "ordering": {"steps": ["chain", "schedule", "launch", "output", "flush"]}
                },
            }
        )
    )
    assert cfg.model.layers % cfg.pp == 0
