"""The checks a served run still has to pass, each with the defect that makes it fire (red)
beside the design that passes it (green), on one simulated schedule of the decision design:

- a follower's POOL_SHORT under a decision (rank 0 admits against the smallest pool): stopped;
- a KV ledger that broke (slots owned by nobody): mismatch, `ledger: ...`;
- flip.inflight=void with a batch in flight at the announcement that was not voided: stopped;
- a re-queued request behind one never admitted: stopped, `queue order: ...`;
- an admission with no token left to compute (a radix match over the whole of a repeated
  prompt): stopped, `admission: ...`, where the pass would have sampled another row.

Each red arm reproduces one zoo mutant's defect (benchmarks/mutants/zoo.py) by a patch of the
same spot's behaviour, so the check, not the mutant's text, is what is under test."""

from __future__ import annotations

from collections import deque

import pytest
from explore_helpers import explorer_cfg, whole_prompt_match

from ppx.core import Req
from ppx.engine.cache.kv import KVCache
from ppx.engine.conservation import queue_order
from ppx.engine.flip import FlipControl
from ppx.engine.scheduler import Scheduler
from ppx.judge import judge_served
from ppx.sim.runner import Runner
from ppx.sim.strategy import RandomStrategy

DESIGN = ["pp=3", "engine/admission=decision", "engine/ordering=decision_first"]
DESIGN += ["engine/guard=rid"]
SKEW = ["faults.pool.rank=1", "faults.pool.tokens=96", "workload.num_requests=4"]
SKEW += ["workload.num_prefixes=1", "workload.prefix_len=24"]
FLIP_VOID = ["flip.enabled=true", "flip.every_s=0.0", "flip.every_passes=4", "flip.max_flips=2"]
FLIP_VOID += ["flip.inflight=void"]
QUEUED = [*FLIP_VOID, "workload.num_requests=6", "workload.concurrency=6", "engine.max_batch=1"]
# one prompt twice, one at a time: the copy is admitted with the whole prompt in the tree
REPEATED = ["workload.num_requests=2", "workload.bench.repeat_count=2", "workload.concurrency=1"]


def run(*overrides: str):
    return Runner(explorer_cfg(*DESIGN, *overrides)).run(RandomStrategy(0))


def own_pool(monkeypatch) -> None:
    """zoo `admit_own_pool`: rank 0 admits against its own pool, not the smallest."""
    monkeypatch.setattr(
        KVCache, "available", property(lambda c: len(c.free) + c.tree.evictable - c.reserved)
    )


def leaky_commit(monkeypatch) -> None:
    """zoo `commit_leaks_duplicates`: a commit's duplicates of tree slots are never freed."""
    commit = KVCache.commit

    def leaky(cache, req):
        n = len(cache.free)
        commit(cache, req)
        del cache.free[n:]

    monkeypatch.setattr(KVCache, "commit", leaky)


def void_unmarked(monkeypatch) -> None:
    """zoo `void_flip_keeps_inflight`: the announcement marks no slot in flight as voided."""
    announce = FlipControl.announce

    def unmarked(flip, pass_id):
        announce(flip, pass_id)
        for b in flip.ctx.sched.inflight:
            if b is not None:
                b.flip_void = False

    monkeypatch.setattr(FlipControl, "announce", unmarked)


def requeue_at_back(monkeypatch) -> None:
    """zoo `requeue_at_back`: a re-queued request goes behind the newer ones."""
    requeue = Scheduler.requeue

    def at_back(sched, req):
        requeue(sched, req)
        if sched.waiting and sched.waiting[0] is req:
            sched.waiting.rotate(-1)

    monkeypatch.setattr(Scheduler, "requeue", at_back)


CASES = {
    "pool_short": (own_pool, SKEW, "stopped", "pool short: rank1 could not hold rid "),
    "ledger": (leaky_commit, SKEW, "mismatch", "ledger: rank0 "),
    "flip_void": (void_unmarked, FLIP_VOID, "stopped", "flip void: 1 of the batches in flight"),
    "queue_order": (requeue_at_back, QUEUED, "stopped", "queue order: rid "),
    "whole_prompt": (
        whole_prompt_match,
        REPEATED,
        "stopped",
        "admission: rid 1 admitted with prefix_len",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_defect_fails_the_run_by_name_and_the_design_serves(monkeypatch, name):
    defect, overrides, verdict, reason = CASES[name]
    green = run(*overrides)
    assert green.verdict == "served", green.row["reason"]
    defect(monkeypatch)
    red = run(*overrides)
    assert (red.verdict, red.row["reason"][: len(reason)]) == (verdict, reason)


def test_the_green_runs_exercise_what_the_checks_read():
    """The green arms are not vacuous: the flip voided what was in flight, and the pool-skew
    run retracted (the pool_short counter is reported, and 0)."""
    flip = run(*FLIP_VOID)
    assert flip.counters.get("flip_voided", 0) > 0 and flip.counters["flips"] == 2
    skew = Runner(explorer_cfg(*DESIGN, *SKEW))
    assert "pool_short" not in skew.run(RandomStrategy(0)).counters  # counted, never > 0


def test_a_repeated_prompt_reuses_all_but_its_last_token(monkeypatch):
    """The green arm of `whole_prompt` meets the whole prompt in the tree: on every rank the
    copy reuses each token but the one it computes to sample from."""
    runner = Runner(explorer_cfg(*DESIGN, *REPEATED))
    first, copy = (runner.workload.request(i) for i in range(2))
    assert first.prompt == copy.prompt
    admitted, admit = [], KVCache.admit

    def spied(cache, req, prefix_len, need):
        admitted.append((req.rid, prefix_len))
        admit(cache, req, prefix_len, need)

    monkeypatch.setattr(KVCache, "admit", spied)
    assert runner.run(RandomStrategy(0)).verdict == "served"
    assert [p for rid, p in admitted if rid == 1] == [len(copy.prompt) - 1] * 3


def test_queue_order_names_the_request_behind_a_fresh_one():
    fresh, again = Req(4, [1, 2], 1), Req(2, [1, 2], 1)
    again.admit_seq = 1
    assert queue_order(deque([again, fresh])) is None
    assert queue_order(deque([fresh, again])).startswith("queue order: rid 2 was re-queued")


def test_the_ledger_judges_only_a_served_run_the_oracle_passed():
    broken = {0: {}, 1: {"ledger_violations": 2, "ledger": {"violations": ["8 slots owned"]}}}
    assert judge_served("served", "", [], broken) == (
        "mismatch",
        "ledger: rank1 2 violations, ['8 slots owned']",
    )
    assert judge_served("served", "", ["rid 0"], broken) == ("mismatch", "oracle: rid 0")
    assert judge_served("wedged", "w", [], broken) == ("wedged", "w")
    assert judge_served("served", "", [], {0: {}}) == ("served", "")
