"""Row authority (sgl-project#1071/#1153), the log's end state, as a policy.

Rank 0's rows are the only truth: followers execute them and never retract; a row a follower
cannot execute is a group STOP naming rank, rid and the numbers. Red: the retraction design it
replaced (`decision`, no guard) under the same honest disagreement keeps voiding until the
livelock bound; green: row authority stops at the first unexecutable row, by name. Without a
disagreement it serves like every other policy.
"""

from __future__ import annotations

from ppx_helpers import SKEW_400, outputs

SIM = ["pp=2", "engine.transport=sim", "engine/ordering=decision_first"]
SKEW = SKEW_400


def test_red_retractions_livelock_green_row_authority_stops_by_name(engine):
    red, _ = engine(*SIM, *SKEW, "engine/admission=decision", "engine/guard=off")
    assert red["verdict"] == "livelocked", red["reason"]
    green, _ = engine(*SIM, *SKEW, "engine/admission=row_authority")
    assert green["verdict"] == "stopped"
    assert green["reason"].startswith("row_authority refusal (on_refusal=stop): rank1 slot=")
    assert " told=[" in green["reason"] and ": cannot execute rid=" in green["reason"]
    assert green["retractions"] == 0 and green["voids"] == 0


def test_without_disagreement_row_authority_serves_the_same_tokens(engine):
    ra, d1 = engine(*SIM, "workload.num_requests=12", "engine/admission=row_authority")
    fw, d2 = engine(*SIM, "workload.num_requests=12", "engine/admission=forwarded")
    assert ra["verdict"] == fw["verdict"] == "served" and ra["oracle_mismatches"] == 0
    assert outputs(d1) == outputs(d2)
