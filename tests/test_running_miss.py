"""sgl-project#944, the RUNNING-batch miss: a rid whose chunked prefill finished lives in the
running batch, and the reconcile's lookup chain (waiting queue -> chunked_req -> the slot's
chunked req) never read it. The fork fixed it in ONE commit with the fourth lookup AND the -1
sentinel with a defer cap escalating to told=0 (the cap is the class fix: "the sentinel by
itself makes the 2106-loop WORSE than the 0 did"; the lookup is this instance's).

`engine.admission.void=keep_running` reaches the state: at pp=3 rank 2's host-tier load lands
late, rank 2 refuses the first offer, rank 1 (which ran the final chunk) keeps the rid in its
running batch, and every re-offer names a rid rank 1 holds there.

- red, the lookup without the running batch and the cap neutered (the log's own can-fail arm,
  `engine.guard.defer_cap=0`): livelocked, rank 1 reporting -1 for the rid at every offer;
- green, the cap alone (`reconcile=slot`, cap 3): told=0 on the fourth offer, one named
  escalation per rid, served;
- green, the fourth lookup (`reconcile=running`, the default): no miss, no escalation, served
  with the prefix reused;
- the pre-#944 mutant (`miss=zero`): the false 0 is learned as a floor (told 0, reuse lost)
  and terminates FASTER than the fix, which is why "it terminated" is no evidence.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
from ppx_helpers import GLOO_WATCH, SHORT_PREFIXES, assert_refused, design, on_gloo

from ppx.core import Entry, Req, SlotBatch
from ppx.engine.cache.kv import KVCache
from ppx.engine.scheduler import Scheduler

# -- the state, built the way a follower holds it ----------------------------------------------


def _ran_final_chunk() -> tuple[Scheduler, Req, SlotBatch]:
    """A rank that ran rid 5's final chunk in slot 1 (pass 1), whose pass then came back void."""
    cache = KVCache(1, pool_tokens=96, kv_heads=1, head_dim=2, max_reqs=4, max_context=64)
    s = Scheduler(cache, num_slots=3, chunk_size=64, max_batch=16)
    req = Req(5, list(range(30)), max_new=4)
    s.add([req])
    b = s.place([s.admit_entry(req, 0, 64)], slot=1, pass_id=1, mode="prefill")
    b.launched = True
    s.after_launch(b)
    b.voided = True
    return s, req, b


def _follower_after_void() -> tuple[Scheduler, Req]:
    s, req, b = _ran_final_chunk()
    kept = design("engine.admission.void", "keep_running")
    assert kept.void(s, b, first=False) == [] and kept.kept == 1  # released 0 of 1
    return s, req


def test_keep_running_keeps_the_follower_copy_rank0_requeues():
    s, req = _follower_after_void()
    assert s.holds_running(req) and req not in s.waiting and s.chunked is None
    s0, r0, b = _ran_final_chunk()  # the same pass on rank 0: it re-offers the rid
    assert design("engine.admission.void", "keep_running").void(s0, b, first=True) == [r0]
    assert r0 in s0.waiting and not s0.holds_running(r0)


def test_the_slot_chain_misses_the_running_batch_the_fourth_lookup_answers():
    s, req = _follower_after_void()
    offer = Entry(5, 24, 6, True, continues=False)  # rank 0 re-offers it fresh
    for name, missed in (("scheduler", True), ("slot", True), ("running", False)):
        rec = design("engine.admission.reconcile", name)
        assert rec.missed(s, req, offer, parks=False) is missed, name
    running = design("engine.admission.reconcile", "running")
    running.missed(s, req, offer, parks=False)
    assert running.running_answers == 1 and s.cache.tree_match(req.tokens) == 29  # measured
    running.rehome(s, req)  # the kept copy back to the queue; the tree keeps its KV
    assert req in s.waiting and not s.holds_running(req) and s.cache.ledger()["num_violations"] == 0


def test_the_follower_own_refusal_keeps_it_again():
    """boot_798's "every own-void released 0 of 1 request": the refused re-offer's void (this
    rank ran nothing) does not put the kept rid back in the queue either."""
    s, req = _follower_after_void()
    refused = SlotBatch(0, 4, "prefill", [Entry(5, 24, 6, True)], voided=True, placed=False)
    refused.incarnation = {5: req.admit_seq}
    assert design("engine.admission.void", "keep_running").void(s, refused) == []
    assert s.holds_running(req) and req not in s.waiting


def test_the_escalation_names_where_the_followers_looked():
    slot = design("engine.admission.reconcile", "slot").where()
    assert slot == "waiting queue, chunked pointer (chunked_req), slot (never the running batch)"
    four = design("engine.admission.reconcile", "running").where()
    assert four == "waiting queue, chunked pointer (chunked_req), slot, running batch"


# -- end to end on the simulator -----------------------------------------------------------------
BASE = [
    "pp=3",
    "engine/ordering=decision_first",
    "engine/admission=decision",
    "engine/guard=rid",
    "faults=host_prefetch",
    "faults.pool.rank=2",
    "faults.pool.tokens=64",
    *SHORT_PREFIXES,
    "engine.kv.host_tier=true",
    "engine.kv.prefetch_ms=[2,2,20]",
    "engine.admission.void=keep_running",
]
SIM = [*BASE, "engine.transport=sim"]
BLIND = "engine.admission.reconcile=slot"
NO_CAP = "engine.guard.defer_cap=0"


def _events(run_dir: str) -> pd.DataFrame:
    return pd.read_parquet(os.path.join(run_dir, "events.parquet"))


def test_red_the_slot_chain_without_the_cap_livelocks_on_the_running_batch(engine):
    red, d = engine(*SIM, BLIND, NO_CAP)
    assert red["verdict"] == "livelocked", red["reason"]
    assert "repeating: [(5, 24, -1), (5, 31, -1)]" in red["reason"], red["reason"]
    assert red["escalations"] == 0
    ev = _events(d)
    miss = ev[(ev.kind == "retract") & (ev["rank"] == 1) & (ev.rid == 5)]
    assert len(miss) >= 10 and miss.detail.str.endswith("local=-1").all()


def test_green_the_cap_pins_told_zero_on_the_fourth_offer_and_names_the_places(engine):
    green, d = engine(*SIM, BLIND)
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
    ev = _events(d)
    offers = ev[(ev.kind == "admit") & (ev["rank"] == 0) & (ev.rid == 5)].detail.tolist()
    assert offers == [f"prefix_len={n}" for n in (24, 31, 31, 0)], offers
    esc = ev[ev.kind == "escalation"]
    assert len(esc) == green["escalations"] == esc.rid.nunique() > 0  # once per rid
    text = esc[esc.rid == 5].detail.iloc[0]
    for word in ("rid=5", "#944", "waiting queue", "chunked_req", "slot", "running batch"):
        assert word in text, text
    assert green["reconcile_misses"] > 0 and green["reconcile_running_answers"] == 0


def test_green_the_fourth_lookup_finds_it_no_miss_no_escalation(engine):
    green, _ = engine(*SIM, NO_CAP)
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
    assert green["reconcile_running_answers"] > 0 and green["reconcile_misses"] == 0
    assert green["escalations"] == 0 and green["cached_tokens"] > 0
    assert green["ledger_violations"] == 0


def test_the_pre_944_zero_learns_a_floor_nobody_measured_and_terminates_faster(engine):
    mutant, _ = engine(*SIM, BLIND, "engine.guard.miss=zero")
    assert mutant["verdict"] == "served" and mutant["unresolved"] == 0
    assert mutant["guard_floors_learned"] > 0 and mutant["cached_tokens"] == 0


def test_gloo_red_the_running_batch_miss_livelocks(ppx_run):
    proc, s, _ = ppx_run(*on_gloo(SIM), BLIND, NO_CAP, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "livelocked", s["reason"]
    assert "repeating: [(5, 24, -1), (5, 31, -1)]" in s["reason"] and s["escalations"] == 0


def test_gloo_green_the_fourth_lookup_serves_under_a_deadline(ppx_run):
    # six requests, not twelve: the rid a follower keeps in its running batch comes back from
    # the second request over a prefix on (5 running-batch answers on gloo, measured)
    few = [*on_gloo(SIM), "workload.num_requests=6"]
    proc, s, _ = ppx_run(*few, NO_CAP, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "served" and s["served"] == 6, s["reason"]
    assert s["oracle_mismatches"] == 0
    assert s["reconcile_running_answers"] > 0 and s["reconcile_misses"] == 0
    assert s["escalations"] == 0


# -- unresolved on every follower at pp=3 (the fork's gloo scenario (b)) ----------------------
EVERYWHERE = [
    *[o for o in SIM if not o.startswith(("engine.kv.prefetch_ms=", "engine.admission.void="))],
    "engine.kv.prefetch_ms=[2,30000,30000]",
]


def test_unresolved_everywhere_red_no_cap_livelocks_green_escalates_naming_four_places(engine):
    red, _ = engine(*EVERYWHERE, NO_CAP)
    assert red["verdict"] == "livelocked" and "(5, 24, -1)" in red["reason"], red["reason"]
    assert red["escalations"] == 0
    green, d = engine(*EVERYWHERE)
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
    esc = _events(d)
    esc = esc[esc.kind == "escalation"]
    assert len(esc) == green["escalations"] == esc.rid.nunique() == 2  # once per rid
    for text in esc.detail:  # the default lookup chain reads the running batch: it is named
        assert "slot, running batch; next told=0" in text and "never" not in text, text


REFUSED = {
    "keep_running at pp=2": (
        ["pp=2", "engine/admission=decision", "engine.admission.void=keep_running"],
        "engine.admission.void=keep_running needs pp >= 3",
    ),
    "keep_running without voids": (
        ["engine.admission.void=keep_running"],
        "engine.admission.void=keep_running means nothing: engine/admission=rank_local",
    ),
    "slot without a decision": (
        ["engine.admission.reconcile=slot"],
        "engine.admission.reconcile=slot means nothing: engine/admission=rank_local",
    ),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_validation_refuses_with_one_line(overrides, message):
    assert_refused(overrides, message)
