"""A told row that outlives its pass (sgl-project#1059 promise, #1061 epoch gate, #1063 removal).

Red (`told_scope=promise`): a follower stamps rank 0's told on the request and applies it at a
later admission; after a TP<->PP cutover dropped every tree the promise names a prefix no rank
holds, and the group stops by name (the log's boots 30/31). Green: the epoch gate ignores the
stale row (`epoch`), and the pass-scoped told the log settled on never stamps one (`pass`).
Sim transport, pp=2, flips every 15 passes.
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
]


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
