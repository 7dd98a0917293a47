"""Admission protocols over real gloo ranks: each defect reproduced (red) beside its fix
(green). Runs boot the real multi-process engine in-process (tests/ppx_helpers.run_inproc).

Where a test compares counts between two runs, or its red arm's outcome depends on which
rank gets there first, it runs on the deterministic simulator (`SIM`: the same rank code,
one fixed schedule seed), so the numbers compared are the protocol's and not the machine's.
"""

from __future__ import annotations

import os
import re

import pandas as pd
from ppx_helpers import SHORT_SKEW, outputs, shape

DF = ["pp=2", "engine/ordering=decision_first", "watch.stall_s=3"]
SIM = ["engine.transport=sim", "explore.seed=0"]
SHORT = SHORT_SKEW


def test_retraction_loop_livelocks_without_guard_and_serves_with_it(engine):
    red, _ = engine(*DF, *SHORT, "engine/admission=decision", "engine/guard=off")
    assert red["verdict"] == "livelocked"
    assert "consecutive voided passes" in red["reason"] and "rid" in red["reason"]
    green, _ = engine(*DF, *SHORT, "engine/admission=decision", "engine/guard=rid")
    assert green["verdict"] == "served", green["reason"]
    assert green["retractions"] > 0 and green["guard_floors_learned"] > 0
    assert green["oracle_mismatches"] == 0 and green["ledger_violations"] == 0
    assert green["submitted"] == green["served"] + green["refused"]


def test_prefix_guard_needs_fewer_voids_than_rid_guard(engine):
    # rank 1 can never keep these prefixes, so a floor that clears when the group serves the
    # prefix (#963, the default) is re-learned per request, like the rid guard's; only a
    # floor that stays (prefix_clear=never) saves those voids, at the cost of all reuse on a
    # prefix that does heal (tests/test_guard_switches.py)
    rid, _ = engine(*SIM, *DF, *SHORT, "engine/admission=decision", "engine/guard=rid")
    prefix, _ = engine(
        *SIM,
        *DF,
        *SHORT,
        "engine/admission=decision",
        "engine/guard=prefix",
        "engine.guard.prefix_clear=never",
    )
    assert rid["verdict"] == prefix["verdict"] == "served"
    assert 0 < prefix["voids"] < rid["voids"]


def test_void_output_keeps_the_ring_matched_and_its_absence_wedges(engine):
    green, _ = engine(*DF, *SHORT, "engine/admission=decision", "engine/guard=rid")
    assert green["verdict"] == "served" and green["voids"] > 0
    red, _ = engine(
        *DF,
        *SHORT,
        "engine/admission=decision",
        "engine/guard=rid",
        "faults.drop_void_output.enabled=true",
    )
    assert red["verdict"] == "wedged"
    assert "recv output" in (red["cycle"] or "") or any(
        b and b["kind"] == "output" for b in red["blocked_on"]
    )


def test_forwarded_void_serves_and_stop_names_the_refusal(engine):
    served, _ = engine(
        *DF,
        *SHORT,
        "engine/admission=forwarded",
        "engine/guard=rid",
        "engine.admission.on_refusal=void",
    )
    assert (
        served["verdict"] == "served"
        and served["refusals"] > 0
        and served["oracle_mismatches"] == 0
    )
    stopped, _ = engine(
        *DF, *SHORT, "engine/admission=forwarded", "engine.admission.on_refusal=stop"
    )
    assert stopped["verdict"] == "stopped"
    assert "forwarded refusal" in stopped["reason"] and "rank1" in stopped["reason"]
    assert stopped["submitted"] == stopped["served"] + stopped["refused"] + stopped["lost"]


def test_readiness_turns_a_silent_block_into_a_named_stop(engine):
    wedge = [
        "pp=2",
        "engine/admission=decision",
        "engine/ordering=flush_before_decision",
        "workload.num_requests=6",
        "watch.stall_s=3",
    ]
    red, _ = engine(*wedge)
    assert red["verdict"] == "wedged"
    assert shape(red["cycle"]) == "rank0 -[flush chain]-> rank1 -[recv decision]-> rank0"
    # the stop needs no watchdog: a stall window far beyond the budget keeps the wedge
    # detector out of the race on a loaded machine
    green, _ = engine(
        *wedge, "engine.readiness=true", "engine.readiness_budget_s=1.0", "watch.stall_s=60"
    )
    assert green["verdict"] == "stopped"
    assert green["reason"].startswith("readiness: rank1 waited 1.0s for decision")


def test_readiness_on_a_correct_ordering_still_serves(engine):
    """No false positives: evidence is always there in time when the ordering is right."""
    s, _ = engine(
        "pp=2",
        "engine/admission=decision",
        "engine/ordering=decision_first",
        "workload.num_requests=6",
        "workload.max_new=4",
        "engine.readiness=true",
        "engine.readiness_budget_s=30",
    )
    assert s["verdict"] == "served", s["reason"]
    assert s["oracle_mismatches"] == 0 and s["submitted"] == s["served"] == 6


def test_same_width_divergence_is_caught_by_the_fingerprint(engine):
    # equal-length prompts and one request per batch: when rank 1 scans its queue newest-first
    # its batch has the same row count as rank 0's but other requests
    same_width = [
        *SIM,  # which request each rank picks first is the test: one fixed schedule
        "pp=2",
        "workload=shared_prefix",
        "workload.prefix_len=16",
        "workload.prompt_min=10",
        "workload.prompt_max=10",
        "workload.num_requests=8",
        "workload.concurrency=4",
        "workload.max_new=4",
        "engine.max_batch=1",
        "faults.lifo.rank=1",
        "watch.stall_s=3",
    ]
    green, _ = engine(*same_width)
    assert green["verdict"] == "stopped"
    assert "proxy width check" in green["reason"]
    rows, tokens = re.search(r"rows=(\d+) vs tokens=(\d+)", green["reason"]).groups()
    assert rows == tokens  # same width: only the fingerprint saw it
    red, run_dir = engine(*same_width, "engine.width_check=rows")
    assert red["verdict"] == "served"  # a row count alone does not see it...
    ev = pd.read_parquet(os.path.join(run_dir, "events.parquet"))
    admits = ev[ev.kind == "admit"].groupby(["pass_id", "rank"])["rid"].apply(tuple).unstack()
    assert (admits[0] != admits[1]).any()  # ...although the ranks ran different requests


def test_policies_agree_with_rank_local_without_divergence(engine):
    base = ["pp=2", "workload=shared_prefix", "workload.num_requests=10", "workload.max_new=6"]
    local, d0 = engine(*base)
    dec, d1 = engine(*base, "engine/admission=decision", "engine/ordering=decision_first")
    fwd, d2 = engine(*base, "engine/admission=forwarded", "engine/ordering=decision_first")
    assert local["verdict"] == dec["verdict"] == fwd["verdict"] == "served"
    assert outputs(d0) == outputs(d1) == outputs(d2)
    assert dec["retractions"] == fwd["refusals"] == 0


def test_host_tier_prefetch_is_reported_unresolved_and_the_guard_serves(engine):
    host = [
        *DF,
        *SHORT,
        "faults=host_prefetch",
        "faults.pool.tokens=64",
        "engine.kv.host_tier=true",
        "engine.kv.prefetch_ms=[2,300]",
    ]
    s, _ = engine(*host, "engine/admission=decision", "engine/guard=rid")
    assert s["verdict"] == "served" and s["unresolved"] > 0
    assert s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0
