"""The oracle on every explored schedule: a config that serves wrong tokens is a `mismatch`
failure whose saved schedule replays to `mismatch`; the tokens checked are counted; models
and KV caches are kept across schedules and reset, never leaking one schedule into the next."""

from __future__ import annotations

import os

import pytest
from explore_helpers import explore_in, explorer_cfg, replay
from ppx_helpers import QUEUE_ORDER

from ppx.engine.cache.kv import KVCache
from ppx.sim.runner import Runner
from ppx.sim.strategy import RandomStrategy

# #791's forwarded slice 1: the follower walks its own queue (newest first), the same rids in
# another order under an equal width, behind a row-count check: only the tokens show it
ORDER = [*QUEUE_ORDER, "explore.schedules=6"]


def test_wrong_tokens_are_a_mismatch_failure_whose_schedule_replays_to_mismatch(tmp_path):
    red = explore_in(tmp_path / "red", *ORDER, "engine.admission.batch_order=queue")
    assert set(red.table["verdict"]) == {"mismatch"}
    assert all(r.startswith("oracle: rid ") for r in red.table["reason"])
    (key,) = red.failures
    assert key.startswith("mismatch: oracle: rid #")
    path = red.paths[key]
    overrides = [o for o in ORDER if not o.startswith("explore.")]
    overrides.append("engine.admission.batch_order=queue")
    for name in ("schedule.txt", "original.txt"):  # shrunk and as found: both replay
        s = replay(tmp_path / name, overrides, os.path.join(os.path.dirname(path), name))
        assert s["verdict"] == "mismatch" and s["reason"].startswith("oracle: rid "), s["reason"]
        assert s["oracle_mismatches"] > 0
    green = explore_in(tmp_path / "green", *ORDER, "engine.admission.batch_order=decision")
    assert set(green.table["verdict"]) == {"served"} and not green.failures
    assert (green.table["tokens_checked"] > 0).all()


def test_a_corrupt_token_fails_every_schedule(tmp_path):
    ex = explore_in(tmp_path, "pp=3", "faults=corrupt_token", "explore.schedules=4")
    assert set(ex.table["verdict"]) == {"mismatch"}
    assert all("rid 0 token 1" in r for r in ex.table["reason"])


@pytest.mark.parametrize("sample,share", [(1.0, 1.0), (0.5, 0.5)])
def test_tokens_checked_are_the_served_tokens_the_oracle_read(tmp_path, sample, share):
    ex = explore_in(tmp_path, "pp=3", f"oracle.sample={sample}", "explore.schedules=3")
    df = ex.table
    assert set(df["verdict"]) == {"served"}
    # 4 requests of 4 tokens each; half the requests sampled, half the tokens checked
    assert (df["tokens"] == 16).all() and (df["tokens_checked"] == 16 * share).all()


def test_models_and_caches_are_kept_across_schedules_and_reset(monkeypatch):
    cfg = explorer_cfg("pp=3", "engine/admission=decision", "engine/ordering=decision_first")
    runner = Runner(cfg)
    first = runner.run(RandomStrategy(1))
    kept = {k: id(v) for k, v in runner.models.items()}
    assert any(k[0] == "kv" for k in kept) and len(kept) == 6  # a model and a cache per rank
    second = runner.run(RandomStrategy(2))
    assert {k: id(v) for k, v in runner.models.items()} == kept  # reused, not rebuilt
    fresh = Runner(cfg).run(RandomStrategy(2))
    assert second.row == fresh.row and second.choices == fresh.choices
    assert first.choices != second.choices
    # red: a reset that leaves the last schedule's radix tree and free list behind
    monkeypatch.setattr(KVCache, "reset", lambda self: None)
    leaky = runner.run(RandomStrategy(2))
    assert (leaky.row, leaky.choices) != (fresh.row, fresh.choices)
