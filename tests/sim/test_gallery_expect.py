"""A gallery cell's expectation as the exhaustive search's end property (gallery_expect.py).

Red arms: a red whose incident is a counter (#944 miss sentinel: `unresolved: 0`,
`escalations: 0`, served) is `verified` by the verdict property -- no end fails -- and
refuted by its expectation, with a trace no longer than plain search's shortest end that
meets it; the guard unit red's incident is an event sequence, met only when the run's
events are kept; a green's counter that differs fails it, one that does not, does not."""

from __future__ import annotations

import functools
from dataclasses import replace

from ppx.sim import gallery
from ppx.sim.exhaustive_run import search
from ppx.sim.gallery_expect import EndProperty, counts_the_load
from ppx.sim.gallery_ladder import Rung

SMALL = Rung(2, 1)
WALK = ["explore.clock=idle", "explore.strategy=exhaustive", "explore.shrinker.runs=0",
        "explore.schedules=100000", *SMALL.overrides()]  # fmt: skip
PLAIN = ["explore.reduce=none", "explore.exhaustive.cache=false"]
CACHED = ["explore.reduce=sleep", "explore.exhaustive.cache=true"]


@functools.cache
def cell(name: str, arm: str) -> gallery.Cell:
    return next(c for c in gallery.gallery_cells(name, arm))


def walk(c: gallery.Cell, mode: list[str], prop: EndProperty | None):
    return search(gallery.compose([*c.overrides, *WALK, *mode]), lambda *_: None, None, prop)


def test_a_cells_property_is_its_own_expectation_selected_by_when():
    assert [e["name"][:11] for e in cell("#1153 forwarded refusal", "red").expect] == [
        "#1153 void:"
    ]
    # selected by the cell's choices, not its labels: ordering decision_first at pp=3
    assert cell("#796 blocking lap", "green").expect[0]["name"].startswith("orderings green")


def test_the_checks_that_count_the_load_leave_a_greens_property_below_its_own_load():
    assert counts_the_load("voids", 10) and counts_the_load("retractions", ">0")
    assert counts_the_load("event_sequence", {"kind": "admit", "seq": [1]})
    assert not counts_the_load("voids", 0) and not counts_the_load("refusals", "<=0")
    assert not counts_the_load("verdict", "served") and not counts_the_load("guard", "rid")
    green = cell("#791 admission divergence", "green").expect
    below = EndProperty.of(green, "green", own_load=False).checks[0]
    assert {k for k in below if k not in ("name",)} == {"verdict", "oracle_mismatches"}
    own = EndProperty.of(green, "green", own_load=True).checks[0]
    assert {"served", "voids", "retractions"} <= set(own)
    # a red keeps them at every rung (an end must meet them all); printed texts never
    red = EndProperty.of(cell("#791c partial retraction", "red").expect, "red", False).checks[0]
    assert {"exclusions", "voids", "verdict"} <= set(red) and "reason" not in red


def end(**kw) -> dict:
    return {"verdict": "served", "reason": "", "cycle": None, "oracle_mismatches": 0} | kw


def test_an_end_is_judged_by_the_studys_evaluator():
    red = EndProperty.of(cell("#1153 forwarded refusal", "red").expect, "red", False)
    assert red(end(refusals=2)) == "served: [meets: oracle_mismatches=#, refusals=#]"
    assert red(end(refusals=0)) is None  # red arm: the counter is the incident
    assert red(end(verdict="wedged", refusals=2)) is None
    green = EndProperty.of(cell("#791 admission divergence", "green").expect, "green", True)
    ok = end(served=12, voids=10, retractions=3)
    assert green(ok) is None
    assert "not met" in green(ok | {"voids": 9})  # red arm: served, one void short


def test_an_event_sequence_reads_the_events_the_end_kept():
    green = EndProperty.of(cell("#630 told sequence", "green").expect, "green", True)
    assert green.needs_events

    def admits(*told: int) -> list[dict]:
        return [{"t_s": i, "rank": 0, "kind": "admit", "pass_id": i, "slot": 0, "rid": rid,
                 "epoch": 0, "detail": f"prefix_len={t}"}
                for rid in (1, 2) for i, t in enumerate(told)]  # fmt: skip

    assert green(end(voids=4, events=admits(120, 64, 50))) is None
    assert green(end(voids=4, events=admits(120, 64, 64, 50))) is not None


def test_a_counter_red_is_refuted_by_its_expectation_no_longer_than_plain_search():
    red = cell("#944 miss sentinel", "red")
    prop = EndProperty.of(red.expect, "red", own_load=False)
    # red arm: the verdict property finds no failing end at this bound, the incident unseen
    old = walk(red, CACHED, None).dfs
    assert old["exhausted"] and old["verdict"] == "verified"
    got = {m: walk(red, o, prop) for m, o in (("plain", PLAIN), ("cached", CACHED))}
    for ex in got.values():
        assert ex.dfs["exhausted"] and ex.dfs["verdict"] == "refuted"
    plain = min(r["steps"] for r in got["plain"].rows if r["property_key"])
    assert got["cached"].dfs["trace_len"] <= plain
    ran = min(r["steps"] for r in got["cached"].rows if r["property_key"])
    assert ran > plain  # the breadth-first search over the graph makes it the shortest
    assert all(t["replayed"] for t in got["cached"].dfs["traces"].values())


def test_an_event_sequence_red_is_refuted_only_with_the_events_kept():
    red = cell("#630/#944 guard unit", "red")
    prop = EndProperty.of(red.expect, "red", own_load=False)
    first = [*PLAIN, "explore.schedules=1"]  # the walk's first schedule alone (a probe)
    seen = walk(red, first, prop)
    assert seen.dfs["verdict"] == "refuted" and seen.rows[0]["verdict"] == "served"
    # red arm: the same end without its events: the sequence reads nothing, the end fails it
    blind = walk(red, first, replace(prop, needs_events=False))
    assert blind.rows[0]["end"] == seen.rows[0]["end"] and blind.dfs["verdict"] != "refuted"


def test_a_red_at_its_own_load_is_probed_with_its_own_schedule_too():
    red = cell("#802 intermediate-hop receive", "red")
    own = red.own()
    prop = EndProperty.of(red.expect, "red", own_load=True)
    cfg = gallery.compose([*red.overrides, *own.overrides(), *WALK[:3], *PLAIN,
                           "explore.schedules=1"])  # fmt: skip
    # red arm: the walk's first schedule serves (the void hits no slot with residents)
    first = search(cfg, lambda *_: None, None, prop)
    assert first.dfs["verdict"] != "refuted" and first.rows[0]["verdict"] == "served"
    # the cell's schedule seed (explore.seed=1) wedges as its expectation says
    got = gallery.study_schedule(cfg, prop)
    assert got is not None and got.probe and got.failure.startswith("wedged: rank0")
    probe = gallery.walker(red, 10, own)(own, 30.0, True)
    assert probe.verdict == "refuted" and probe.rung == own


def test_a_green_that_stops_by_name_may_serve_clean_below_its_own_load():
    green = cell("#1153 row authority", "green").expect  # a named STOP at its own load
    below = EndProperty.of(green, "green", own_load=False)
    assert below(end()) is None  # what it stops for never came: serving is right
    assert below(end(verdict="stopped", reason="row_authority refusal: rank1", voids=0)) is None
    assert below(end(oracle_mismatches=1)) is not None  # red arm: a serve with a bad token
    # red arm: at its own load the serve is not the named stop its expectation asks for
    assert EndProperty.of(green, "green", own_load=True)(end()) is not None
