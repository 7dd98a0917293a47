"""The output ring's historical designs (ppx/engine/ring.py), red beside green.

sgl-project#802: after a sgl-project#797 void whose relay stops at the first retracting rank,
the intermediate hop (rank 1 at pp=3) keys its output receive on its own slot occupancy
(resident decode requests) while rank 0 relays nothing: red wedges through rank 1, readiness
turns it into a stop naming rank 1's output arc; keyed on what the upstream relays, it serves.
sgl-project#1071: a rank-local void whose verdict travels downstream only leaves rank 0's
output receive unmatched: it consumes the next output under the voided slot's label.
"""

from __future__ import annotations

from ppx_helpers import SKEW_400

# rank 1's 400-token pool evicts shared prefixes rank 0 keeps: rank 1 retracts, at pp=3 it is
# the intermediate hop, and other requests are resident in the slot it voids
BASE = [
    "pp=3",
    "model=micro",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "engine/guard=rid",
    *SKEW_400,
    "workload.num_requests=10",
    "workload.max_new=6",
]
# the schedule seed whose interleaving voids a slot with residents at the hop (seed 0's
# does not since an isend stopped being a scheduling point)
SIM = ["engine.transport=sim", *BASE, "explore.seed=1"]
FIRST = "engine.ordering.void_relay=first_retracting"
OCCUPANCY = "engine.ordering.output_recv=occupancy"


def test_802_red_occupancy_wedges_through_the_intermediate_hop_green_relayed_serves(engine):
    red, _ = engine(*SIM, FIRST, OCCUPANCY)
    assert red["verdict"] == "wedged", red["reason"]
    # rank 0 waits on rank 1 (its sends), rank 1 waits for an output rank 0 never relays
    assert "rank1 -[recv output" in red["cycle"] and "-> rank0" in red["cycle"], red["cycle"]
    green, _ = engine(*SIM, FIRST)
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
    assert green["voids"] > 0  # the trigger happened: voids relayed only up to rank 1


def test_802_readiness_names_the_intermediate_hops_arc(engine):
    s, _ = engine(*SIM, FIRST, OCCUPANCY, "engine.readiness=true", "engine.readiness_budget_s=1.0")
    assert s["verdict"] == "stopped", s["reason"]
    assert s["reason"].startswith("readiness: rank1 waited 1.0s for output"), s["reason"]
    assert "from rank0" in s["reason"] and "keyed this receive on its residents" in s["reason"]


def test_1071_red_rank_local_void_unmatches_rank0_green_ring_serves(engine):
    red, _ = engine(*SIM, "engine.ordering.void_relay=downstream")
    assert red["verdict"] == "stopped", red["reason"]
    assert red["reason"].startswith("output mismatch: rank0 slot="), red["reason"]
    green, _ = engine(*SIM)
    assert green["verdict"] == "served" and green["voids"] > 0, green["reason"]


def test_802_red_and_green_over_real_gloo(engine):
    # on real processes the trigger is an interleaving, not a given: 16 of 16 runs of the red
    # alone wedged (quiet and beside two busy loops), but one in a full suite run (20:31 UTC,
    # the two cores shared with the other tests) served, with rank 2 retracting pass 29 as
    # well as rank 1, where in the wedged runs rank 1 alone retracts. The red's claim is
    # that this design can wedge over real gloo: up to three runs, each wedged or served
    reds = []
    for _ in range(3):
        red, _ = engine(*BASE, FIRST, OCCUPANCY, "watch.stall_s=3")
        reds.append((red["verdict"], red["reason"]))
        if red["verdict"] == "wedged":
            break
    assert red["verdict"] == "wedged", reds
    assert all(verdict in ("wedged", "served") for verdict, _ in reds), reds
    assert "rank1 -[recv output" in red["cycle"], red["cycle"]
    green, _ = engine(*BASE, FIRST)
    assert green["verdict"] == "served", green["reason"]
