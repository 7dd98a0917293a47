"""A told row that outlives its pass (sgl-project#1059 promise, #1061 epoch gate, #1061b retract
clear, #1063 removal).

Red (`told_scope=promise`): a follower stamps rank 0's told on the request and applies it at a
later admission; after a TP<->PP cutover dropped every tree the promise names a prefix no rank
holds, and the group stops by name (the log's boots 30/31). Green: the epoch gate ignores the
stale row (`epoch`), and the pass-scoped told the log settled on never stamps one (`pass`).

#1061b (boot 31): with the log's clock (`flip.epoch_advance=completion`) the epoch moves after
the cutover re-admitted its residents, so a row decided at epoch N is applied at epoch N to a
request whose tree that cutover dropped: the epoch gate passes it and the group stops. The
retract clear (`epoch_retract`) drops the row where the cutover re-queues the request. The
cutover must have residents (`flip.inflight=drain`; a void re-queues the slots in flight first).
Sim transport, pp=2, flips every 15 passes; one red arm over real gloo processes.
"""

from __future__ import annotations

import pytest
from ppx_helpers import SIM_DECISION

FLIPS = [
    *SIM_DECISION,
    "workload.num_prefixes=2",
    "workload.prefix_len=24",
    "workload.num_requests=16",
    "workload.max_new=6",
    "flip=every_40_passes",
    "flip.every_passes=15",
    # the schedule seed whose interleaving puts a told row across the cutover (seed 0's
    # admissions land clear of it since an isend stopped being a scheduling point)
    "explore.seed=2",
]
IN_CUTOVER = [*FLIPS, "flip.inflight=drain", "flip.epoch_advance=completion"]


def test_red_a_promised_told_row_breaks_after_the_cutover(engine):
    s, _ = engine(*FLIPS, "engine.admission.told_scope=promise")
    assert s["verdict"] == "stopped", s["reason"]
    assert "told row outlived its pass" in s["reason"] and "local=0 at epoch 1" in s["reason"]


@pytest.mark.parametrize("scope", ["epoch", "pass"])
def test_green_the_epoch_gate_and_the_pass_scoped_told_serve(engine, scope):
    s, _ = engine(*FLIPS, f"engine.admission.told_scope={scope}")
    assert s["verdict"] == "served" and s["flips"] >= 1, s["reason"]
    assert s["oracle_mismatches"] == 0
    # the gate refused stale rows; the pass-scoped told never stamped one
    assert (s["told_rows_ignored_stale"] > 0) == (scope == "epoch")
    assert s["told_rows_applied"] == 0


def test_red_the_epoch_gate_cannot_see_a_cutover_inside_its_own_epoch(engine):
    """Boot 31: the gate was consulted, agreed (same epoch), and the apply raised."""
    s, _ = engine(*IN_CUTOVER, "engine.admission.told_scope=epoch")
    assert s["verdict"] == "stopped", s["reason"]
    r = s["reason"]
    assert r.startswith("told row outlived its pass (engine.admission.told_scope=epoch): rank1 ")
    assert "(decided at epoch 0) > local=0 at epoch 0" in r
    assert r.endswith("re-admitted by the cutover (flip.epoch_advance=completion)")
    assert s["flips"] == 0 and s["retracted_at_flip"] > 0  # it died inside the first cutover


def test_green_the_retract_clears_the_row_the_gate_let_through(engine):
    s, _ = engine(*IN_CUTOVER, "engine.admission.told_scope=epoch_retract")
    assert s["verdict"] == "served" and s["flips"] >= 1, s["reason"]
    assert s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0
    # the clear is a printed number, not an inference from an absent stop
    assert s["told_cleared_at_retract"] > 0 and s["retracted_at_flip"] > 0, s
    assert s["told_rows_applied"] == 0 and s["told_rows_ignored_stale"] == 0


def test_green_the_epoch_gate_suffices_when_the_epoch_moves_at_release(engine):
    """The same drained cutover with the epoch advanced before the re-admission: the gate
    sees the stale rows there (the design #1061 assumed)."""
    s, _ = engine(*FLIPS, "flip.inflight=drain", "engine.admission.told_scope=epoch")
    assert s["verdict"] == "served" and s["flips"] >= 1, s["reason"]
    assert s["told_rows_ignored_stale"] >= s["retracted_at_flip"] > 0, s
    assert s["told_rows_applied"] == 0 and s["oracle_mismatches"] == 0


def test_red_a_promise_stops_at_the_cutovers_readmission_when_it_drains(engine):
    s, _ = engine(*FLIPS, "flip.inflight=drain", "engine.admission.told_scope=promise")
    assert s["verdict"] == "stopped", s["reason"]
    assert (
        "local=0 at epoch 1; re-admitted by the cutover (flip.epoch_advance=release)"
        in (s["reason"])
    )


def test_gloo_red_the_epoch_gate_inside_one_epoch(ppx_run):
    """The same red over real gloo processes, as `python -m ppx.run` starts them, with a
    deadline: the stop inside the cutover must end the group, not park rank 0 in the
    epoch check. More and longer requests than on the simulator: with wall-clock arrivals
    the first cutover must still find residents admitted with a shared prefix."""
    gloo = [o for o in IN_CUTOVER if o != "engine.transport=sim"]
    more = ["workload.num_requests=32", "workload.max_new=12"]
    proc, s, _ = ppx_run(*gloo, *more, "engine.admission.told_scope=epoch", timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "stopped", s["reason"]
    assert (
        "> local=0 at epoch 0; re-admitted by the cutover (flip.epoch_advance=completion)"
        in (s["reason"])
    )
