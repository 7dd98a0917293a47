"""Slot-indexed vs slot-blind reconcile, and voids that keep their residents (sgl-project#798).

`engine.admission.reconcile=scheduler` answers a follower's "how much of this rid have I
computed?" from one scheduler-wide chunked pointer; `engine.admission.void=keep` (the log's
`pp_void_keeps_request` era) leaves a voided pass's mid-prefill request in place and restores
that pointer from the voided slot's snapshot. With two slots in flight the restore of one slot
clobbers the pointer the other slot's pass wrote, the kept request is in neither place the
lookup reads, the miss is retracted, and that void restores again: boot_798's livelock.

The workload: rank 1's host-tier load lands late (so a first retraction happens) and prompts
are chunked in 16-token pieces (so the request whose pass voids is mid-prefill).
"""

from __future__ import annotations

import os

import pandas as pd
from ppx_helpers import SHORT_PREFIXES

from ppx.core import Req
from ppx.engine.cache.kv import KVCache

BASE = [
    "pp=2",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "engine/guard=rid",
    "faults=host_prefetch",
    "faults.pool.tokens=64",
    *SHORT_PREFIXES,
    "engine.kv.host_tier=true",
    "engine.kv.prefetch_ms=[2,300]",
    "engine.chunk_size=16",
]
SIM = [*BASE, "engine.transport=sim"]
RED = ["engine.admission.reconcile=scheduler", "engine.admission.void=keep"]


def _continuing_misses(run_dir: str, want_local: int) -> pd.DataFrame:
    """Retractions on rank 1 reporting `want_local` for a told that grows chunk by chunk."""
    ev = pd.read_parquet(os.path.join(run_dir, "events.parquet"))
    r = ev[(ev.kind == "retract") & (ev["rank"] == 1)]
    return r[r.detail.str.endswith(f"local={want_local}")]


def test_red_slot_blind_and_keep_livelock_green_slot_and_requeue_serve(engine):
    green, _ = engine(*SIM)
    red, d = engine(*SIM, *RED)
    assert green["verdict"] == "served" and green["voids"] > 0, green
    assert green["oracle_mismatches"] == 0 and green["ledger_violations"] == 0
    assert red["verdict"] == "livelocked", red
    assert "consecutive voided passes" in red["reason"]
    assert red["ledger_violations"] == 0
    # rank 0 kept the request at every void (rank 1's counters die with the stopped run;
    # its misses are in the events below)
    assert red["void_kept"] > 0, red
    assert green["reconcile_misses"] == green["void_kept"] == green["reconcile_slot_answers"] == 0
    # the shape of boot_798: one rid, its continuation misses (-1 here: the sentinel reports
    # it unresolved) at more than one told, pass after pass
    miss = _continuing_misses(d, -1)
    assert len(miss) >= 10 and miss.rid.nunique() == 1, miss
    assert miss.detail.str.extract(r"told=(\d+)")[0].nunique() >= 2


def test_the_slot_index_alone_is_the_fix_keep_stays(engine):
    """sgl-project#798 kept the void's keep and fixed only the lookup: slot + keep serves;
    the slot-blind lookup without a keeping void (the pre-#797b design) serves too."""
    fixed, _ = engine(*SIM, "engine.admission.void=keep")
    blind_requeue, _ = engine(*SIM, "engine.admission.reconcile=scheduler")
    for s in (fixed, blind_requeue):
        assert s["verdict"] == "served" and s["voids"] > 0, s
        assert s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0
    # a void's restore clobbered rank 1's pointer and the slot's own request answered
    assert fixed["reconcile_slot_answers"] > 0 and fixed["reconcile_misses"] == 0, fixed
    # the blind lookup missed too, but the void had re-queued the rid: it came back fresh
    assert blind_requeue["reconcile_misses"] > 0 and blind_requeue["void_kept"] == 0


def test_a_miss_read_as_zero_feeds_the_same_livelock(engine):
    """engine.guard.miss=zero: the slot-blind miss is reported as local=0, the log's
    `told=98304 local=0`; the -1 sentinel does not end this loop either (a continuation's
    told is its computed length, which no floor or escalation clamps), so #944's sentinel
    is not #798's fix."""
    red, d = engine(*SIM, *RED, "engine.guard.miss=zero")
    assert red["verdict"] == "livelocked" and red["unresolved"] == 0, red
    assert len(_continuing_misses(d, 0)) >= 10


def test_park_returns_a_computed_chunk_to_the_tree_and_keeps_the_ledger():
    cache = KVCache(
        num_layers=1, pool_tokens=64, kv_heads=1, head_dim=2, max_reqs=4, max_context=64
    )
    req = Req(1, list(range(40)), max_new=2)
    cache.admit(req, 0, 42)
    cache.extend(req, 16)
    cache.commit(req)  # chunk 1 computed: the tree owns it
    cache.extend(req, 16)
    cache.commit(req)  # chunk 2 computed
    cache.truncate(req, 16)  # the pass of chunk 2 voided with void=keep: parked at 16
    assert req.computed == 16 and len(cache.rows[1]) == 16
    assert cache.tree.size == 32  # chunk 2's KV stays in the tree, unlocked
    assert cache.ledger()["num_violations"] == 0
    cache.extend(req, 16)  # the chunk runs again and lands on the tree's copy at commit
    cache.commit(req)
    assert cache.ledger()["num_violations"] == 0


def test_gloo_red_slot_blind_and_keep_livelock(ppx_run):
    proc, summary, _ = ppx_run(*BASE, *RED, "logger=none")
    assert summary is not None, proc.stderr[-2000:]
    assert summary["verdict"] == "livelocked", summary["reason"]
    assert "consecutive voided passes" in summary["reason"]
