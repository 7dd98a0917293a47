"""sgl-project#963: a floor scoped to the PREFIX, not the rid. The specimen (window-958 boot 2):
rank 0 holds a 1250-token prefix its peers lack, and "six distinct rids in one second, all
told=1250 local=0": a rid-scoped floor decreases per rid and never terminates over the
population. The fix: the first rid's voided pass teaches the floor for every request over that
prefix ("one wedged pass total"), and serving the prefix clears it (self-healing).

Why the gallery's heal cells show the prefix guard voiding as often as the rid guard (10 and
10): every shortfall there is met by ONE rid over its prefix. ppx heals a follower the moment
the first clamped re-offer runs (its launch commits the prefix), S passes after the void, so a
floor can only spare the rids offered in the pass that re-offer runs in; with four prefixes
round-robin and four requests in flight, no second rid over the same prefix is ever there.
The population cell below has them: six rids over one prefix arriving a pass apart while rank
1 has lost it (`faults.cache_drop.rank`). Under the rid guard each fresh rid is offered the whole
prefix in the same pass as the earlier rids' clamped re-offers, and its refusal voids that
pass too: rank 1 never heals until the arrivals stop (six rids, six voided passes). Under the
prefix guard: exactly one voided pass, then the floor clears when the prefix is served.

One ppx defect fixed here (the red arm of the unit test below): a floor learned from a CLAMPED
offer was keyed at the told (e.g. 100) while offers look up rank 0's match (1250), so a
tightening (100 -> 40) was never found and the population was offered the looser 100 again.
Floors are keyed by the prefix the offer was made over, as the log's `prefix_key` is.
"""

from __future__ import annotations

import os

import pandas as pd
from ppx_helpers import ROOT, make_guard

from ppx.core import UNRESOLVED
from ppx.protocol.guard.floors import prefix_key

TOLD = 1250
PREFIX_A = list(range(100, 100 + TOLD))
PREFIX_B = list(range(2000, 2000 + TOLD))


def over(prefix: list[int], rid: int) -> list[int]:
    return prefix + [rid % 200 + 7, 3, 5]  # the request's own tail


def test_the_whole_boot2_population_costs_exactly_one_voided_pass():
    for guard, want in (("prefix", 1), ("rid", 6)):  # red: the rid-scoped floor
        g = make_guard(guard, defer_cap=3)
        unhonourable = 0
        for rid in range(6):
            told = g.clamp(rid, over(PREFIX_A, rid), TOLD)
            if told > 0:  # rank 1's tree lacks the prefix: the offer costs a voided pass
                unhonourable += 1
                g.learn(rid, over(PREFIX_A, rid), told, 0)
        assert unhonourable == want, guard


def test_a_prefix_no_rank_complained_about_is_never_clamped():
    g = make_guard("prefix", defer_cap=3)
    assert g.clamp(1, over(PREFIX_A, 1), TOLD) == TOLD
    g.learn(1, over(PREFIX_A, 1), TOLD, 0)
    assert g.clamp(2, over(PREFIX_B, 2), TOLD) == TOLD


def test_serving_the_prefix_clears_the_floor():
    g = make_guard("prefix", defer_cap=3)
    g.clamp(1, over(PREFIX_A, 1), TOLD)
    g.learn(1, over(PREFIX_A, 1), TOLD, 0)
    assert g.clamp(2, over(PREFIX_A, 2), TOLD) == 0
    g.prefix_served(over(PREFIX_A, 2))  # the group served rid 2 (told 0) over the prefix
    assert g.clamp(3, over(PREFIX_A, 3), TOLD) == TOLD and g.floors.cleared == 1


def test_the_prefix_floor_only_ever_tightens_through_a_clamped_offer():
    g = make_guard("prefix", defer_cap=3)
    g.clamp(1, over(PREFIX_A, 1), TOLD)
    g.learn(1, over(PREFIX_A, 1), TOLD, 100)
    assert g.clamp(2, over(PREFIX_A, 2), TOLD) == 100
    g.learn(2, over(PREFIX_A, 2), 100, 40)  # the clamped offer, refused again
    # keyed at the told (100), this floor would hide from every offer made over 1250
    assert g.clamp(3, over(PREFIX_A, 3), TOLD) == 40
    g.learn(3, over(PREFIX_A, 3), 40, 39)
    g.learn(4, over(PREFIX_A, 4), TOLD, 900)  # a looser later report does not widen it
    assert g.clamp(5, over(PREFIX_A, 5), TOLD) <= 39


def test_an_unresolved_miss_teaches_the_prefix_floor_nothing():
    g = make_guard("prefix", defer_cap=3)
    g.clamp(1, over(PREFIX_A, 1), TOLD)
    g.learn(1, over(PREFIX_A, 1), TOLD, UNRESOLVED)
    assert g.floors.prefix_floor == {} and g.clamp(2, over(PREFIX_A, 2), TOLD) == TOLD


def test_the_floor_table_is_bounded_and_the_key_is_not_python_hash():
    g = make_guard("prefix", defer_cap=3)
    slots = g.floors.SLOTS
    for i in range(slots + 100):
        g.learn(i, [i, i + 1, 9], 2, 0)
    assert len(g.floors.prefix_floor) == slots
    # blake2b over the tokens and the length: the same on every rank, a prefix and its
    # extension differ
    assert prefix_key(PREFIX_A, 4) == "cfa1f089c00830727beec5f17ef4322b"
    assert prefix_key(PREFIX_A, TOLD) != prefix_key(PREFIX_A + PREFIX_A, 2 * TOLD)


# -- the population end to end on the simulator -------------------------------------------------
POPULATION = [
    "pp=2",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    "engine/admission=decision",
    "workload=jsonl",
    f"workload.path={os.path.join(ROOT, 'experiments', 'data', 'prefix_population_963.jsonl')}",
    "workload.concurrency=6",
    "engine.chunk_size=1024",
    "engine.liveness.livelock_passes=32",
    "faults.cache_drop.rank=1",
    "faults.cache_drop.after_pass=2",
]


def _refusals(run_dir: str) -> pd.DataFrame:
    ev = pd.read_parquet(os.path.join(run_dir, "events.parquet"))
    return ev[(ev.kind == "retract") & (ev["rank"] == 1)]


def test_red_rid_scoped_six_rids_six_voids_green_prefix_one_void_then_cleared(engine):
    red, d = engine(*POPULATION, "engine/guard=rid")
    assert red["verdict"] == "served" and red["oracle_mismatches"] == 0, red["reason"]
    r = _refusals(d)
    assert red["voids"] == 6 and r.rid.nunique() == 6
    assert r.detail.str.endswith("told=96 local=0").all()  # six distinct rids, one shortfall
    green, d = engine(*POPULATION, "engine/guard=prefix")
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
    assert green["voids"] == 1 and len(_refusals(d)) == 1
    assert green["prefix_floors_cleared"] == 1 and green["cached_tokens"] > red["cached_tokens"]
    never, _ = engine(*POPULATION, "engine/guard=prefix", "engine.guard.prefix_clear=never")
    assert never["voids"] == 1 and never["prefix_floors_cleared"] == 0
    assert never["cached_tokens"] < green["cached_tokens"]  # healed, yet clamped for good
