"""engine.guard.unit: what one voided pass teaches rank 0's guard about a rid (sgl-project#630,
#791 exactly-once, #944), and the #944 defer cap's boundary and escalation.

In the log the first rank that cannot honour an entry marks it retracted and later ranks pass
it through, so a returned decision carries one report per rid: the #630 floor and the #944
unresolved count are per ROUND. ppx's followers each check every entry, so one void can carry
a row per rank for one rid (measured below at pp=3: `obs [[1, 1, 120, 64], [2, 1, 120, 50]]`).
`rounds` (default) reads the first rank's row; `reports` reads every row.

The fork's harnesses, rebuilt on the guard: #630 `TerminationAcrossMoreThanOneDownstreamRankTest`
(pp=3, rank 1 holds 64, rank 2 holds 50 of a 120-token offer: tolds 120 -> 64 -> 50 -> served,
floor cleared) and #944 `TheUnresolvedDeferIsCapped` (cap 3: offers [4096] * 3, then 0; one
ERROR naming the rid, "#944" and the four lookup places, however many offers follow).
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
from ppx_helpers import assert_refused, make_guard

from ppx.core import UNRESOLVED
from ppx.protocol.guard.guard import Guard

RID, PROMPT = 1, list(range(200))  # 120 tokens of prefix + the request's own 80
HOLDS = {1: 64, 2: 50}  # rank -> what its tree holds of the offer (the fork's local matches)


def rows(told: int, holds: dict[int, int] = HOLDS) -> list[list[int]]:
    """The obs rows ppx's followers put on a void for `told`: every rank that holds less."""
    return [[rank, RID, told, local] for rank, local in holds.items() if local < told]


def run_630(g: Guard, first: int = 120) -> list[int]:
    """Offer, void, learn, until an offer comes back clean; returns the tolds offered."""
    tolds = []
    for _ in range(6):
        told = g.clamp(RID, PROMPT, first)
        tolds.append(told)
        obs = rows(told)
        if not obs:  # every rank honours it: the pass is served, the floor clears
            g.served(RID)
            return tolds
        g.learn_void(obs, lambda rid: PROMPT)
    raise AssertionError(f"never served: {tolds}")


def test_630_rounds_tolds_strictly_decrease_120_64_50_then_served_and_cleared():
    g = make_guard("rid", defer_cap=3)
    assert run_630(g) == [120, 64, 50]
    assert g.floors.rid_floor == {} and g.unit.folded == 1  # rank 2's 50 in round one
    assert g.clamp(RID, PROMPT, 120) == 120  # the floor cleared once served


def test_630_reports_jump_to_the_lowest_rank_at_once():
    g = make_guard("rid", defer_cap=3, unit="reports")
    assert run_630(g) == [120, 50]  # rank 2's 50 learned from the 120 round already
    assert g.floors.learned == 2 and g.unit.folded == 0


def test_a_third_unrelated_rid_is_not_clamped():
    g = make_guard("rid", defer_cap=3)
    g.learn_void(rows(120), lambda rid: PROMPT)
    assert g.clamp(9, list(range(15)), 10) == 10


def _unresolved_rounds(g: Guard, followers: int, offers: int = 8) -> list[int | None]:
    """Every follower misses the rid at every offer (the fork's gloo scenario 'all')."""
    tolds = []
    for _ in range(offers):
        told = g.clamp(RID, PROMPT, 4096)
        tolds.append(told)
        if told is not None:
            g.learn_void(
                [[r, RID, told, UNRESOLVED] for r in range(1, followers + 1)], lambda rid: PROMPT
            )
    return tolds


def test_944_rounds_pins_told_zero_on_the_fourth_offer_whatever_the_world():
    for followers in (1, 2, 3):
        g = make_guard("rid", defer_cap=3)
        offers = [t for t in _unresolved_rounds(g, followers) if t is not None]
        # the fork: offers [4096] * UNRESOLVED_DEFER_CAP, then 0 (None = held one round)
        assert offers[:4] == [4096, 4096, 4096, 0], (followers, offers)
        assert g.n.escalations == 1 and g.defers[RID] >= 3


def test_944_reports_count_each_follower_and_escalate_a_round_early():
    g = make_guard("rid", defer_cap=3, unit="reports")
    offers = [t for t in _unresolved_rounds(g, followers=2) if t is not None]
    assert offers[:3] == [4096, 4096, 0]  # 2 + 2 reports reach the cap after two voids


def test_944_escalation_is_named_once_not_per_offer_and_clears_when_served():
    for streak in ("refusal", "offer"):
        seen: list[tuple[int, int]] = []
        note = seen.append
        g = make_guard(
            "rid", 3, defer_streak=streak, on_escalate=lambda r, n, note=note: note((r, n))
        )
        _unresolved_rounds(g, followers=2, offers=20)  # offer-keyed: escalates again and again
        assert seen == [(RID, 3)], (streak, seen)
        g.served(RID)
        _unresolved_rounds(g, followers=1, offers=8)
        assert seen == [(RID, 3), (RID, 3)]  # a new life of the rid is named again


def test_944_a_measured_shortfall_does_not_count_toward_the_cap():
    g = make_guard("rid", defer_cap=3)
    for _ in range(5):
        g.learn(RID, PROMPT, 4096, 128)
    assert g.defers.get(RID, 0) == 0 and g.floors.rid_floor[RID] == 128


# -- the decision flow on the simulator: pp=3, rank 1 holds 64, rank 2 holds 50 -------------
SIM_630 = [
    "pp=3",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    "engine/admission=decision",
    "workload.num_prefixes=1",
    "workload.prefix_len=120",
    "workload.num_requests=3",
    "workload.concurrency=1",
    "workload.max_new=4",
    "engine.chunk_size=256",
    "faults.match_cap.tokens=[-1,64,50]",
    "engine.liveness.livelock_passes=24",
]


def _tolds(run_dir: str) -> dict[int, list[int]]:
    ev = pd.read_parquet(os.path.join(run_dir, "events.parquet"))
    adm = ev[(ev.kind == "admit") & (ev["rank"] == 0)]
    told = adm.detail.str.extract(r"prefix_len=(\d+)")[0].astype(int)
    return {int(rid): told[adm.rid == rid].tolist() for rid in adm.rid.unique()}


def test_630_sim_green_rounds_120_64_50_red_no_guard_repeats_120(engine):
    green, d = engine(*SIM_630, "engine/guard=rid")
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
    tolds = _tolds(d)
    assert tolds[1] == tolds[2] == [120, 64, 50], tolds  # rid 0 was cold (told 0)
    assert green["voids"] == 4 and green["reports_folded"] == 2
    reports, d = engine(*SIM_630, "engine/guard=rid", "engine.guard.unit=reports")
    assert _tolds(d)[1] == [120, 50] and reports["voids"] == 2
    red, d = engine(*SIM_630, "engine/guard=off")
    assert red["verdict"] == "livelocked", red["reason"]
    # no floor: told never comes down (it even grows: rank 0 ran the voided pass, so its tree
    # holds the request's own tokens too), and rank 1's 64 repeats until the bound
    assert min(_tolds(d)[1]) == 120 and "(1, 120, 64)" in red["reason"], red["reason"]


def test_630_every_match_stated_red_repeats_120_green_rounds_120_64_50(engine):
    # the fork's harness states rank 0's match too (120): the told repeats 120 without a floor,
    # as in TerminationAcrossMoreThanOneDownstreamRankTest, instead of rising to 138
    stated = [o for o in SIM_630 if not o.startswith("faults.match_cap.tokens=")]
    stated.append("faults.match_cap.tokens=[120,64,50]")
    red, d = engine(*stated, "engine/guard=off")
    assert red["verdict"] == "livelocked", red["reason"]
    assert "repeating: [(1, 120, 64)];" in red["reason"] and set(_tolds(d)[1]) == {120}
    green, d = engine(*stated, "engine/guard=rid")
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
    assert _tolds(d)[1] == _tolds(d)[2] == [120, 64, 50]


REFUSED = {
    "unknown unit": (["engine/admission=decision", "engine.guard.unit=round"], "rounds | reports"),
    "reports with no guard": (
        ["engine/admission=decision", "engine.guard.unit=reports"],
        "engine.guard.unit=reports means nothing: engine/guard=off",
    ),
    "reports at pp=2": (
        ["pp=2", "engine/admission=decision", "engine/guard=rid", "engine.guard.unit=reports"],
        "engine.guard.unit=reports needs pp >= 3",
    ),
    "match_cap width": (
        ["faults.match_cap.tokens=[-1,4]"],
        "faults.match_cap.tokens=[-1, 4]: one token count",
    ),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_validation_refuses_with_one_line(overrides, message):
    assert_refused(overrides, message)
