"""The gallery's ladder of bounds (ppx/sim/gallery_ladder.py): a red climbs from the smallest
bound until refuted, a green while verified, up to the cell's own load.

Red arms: the #1180 late hop red is `verified` at the smallest bound alone (the fixed bound
hides it) and refuted one rung up; the trace the walk's graph gives at that rung is no longer
than the shortest failing schedule of plain search (every interleaving, no reduction, no
cache) and shorter than any run the cached walk itself ran (without the breadth-first search
over the graph its trace would be longer)."""

from __future__ import annotations

from ppx.sim import gallery
from ppx.sim.exhaustive_run import search
from ppx.sim.gallery_ladder import Climb, Rung, Walk, climb, rungs

LATE_HOP = "#1180 late hop"  # own load 4 requests, max_new 4; verified at 2x1, refuted at 3x2
SMALL, NEXT = Rung(2, 1), Rung(3, 2)


def test_the_rungs_climb_from_the_smallest_bound_to_the_cells_own_load():
    assert [str(r) for r in rungs(Rung(12, 8))] == ["2x1", "3x2", "4x3", "6x4", "8x6", "12x8"]
    assert [str(r) for r in rungs(Rung(3, 4))] == ["2x1", "3x2", "3x3", "3x4"]
    assert [str(r) for r in rungs(Rung(24, 12))][-2:] == ["16x12", "24x12"]
    assert rungs(Rung(12, 8), start=Rung(3, 2))[0] == Rung(3, 2)
    assert rungs(Rung(1, 1)) == [Rung(1, 1)]  # a load below the smallest bound is its own
    # the top rung: the own load with the study's settings the explorer's config replaces
    study = Rung(4, 4, (("workload.prefix_len", "96"),))
    assert [str(r) for r in rungs(study)] == ["2x1", "3x2", "4x3", "4x4", "4x4+"]
    assert rungs(study)[-1].overrides()[-1] == "workload.prefix_len=96"


def test_the_top_rung_is_the_cells_load_as_the_study_composes_it():
    own = next(c for c in gallery.gallery_cells("#791 forwarded batch order", "red")).own()
    assert (own.requests, own.max_new) == (8, 4)  # the cell's own (the gallery's base: 6)
    assert dict(own.restored)["workload.prefix_len"] == "96"  # conf/explorer.yaml: 16


def fake(answers: dict[tuple[Rung, bool], str], seen: list):
    """A walk that answers from a table, recording (rung, budget, probe) of each call."""

    def walk(rung: Rung, budget_s: float, probe: bool) -> Walk:
        seen.append((rung, budget_s, probe))
        v = answers.get((rung, probe), "served" if probe else "verified")
        verdict = "unknown" if v == "served" else v
        return Walk(rung, verdict, v == "verified", 1, 1, 0.0, 3 if v == "refuted" else None,
                    "wedged: x" if v == "refuted" else "", probe)  # fmt: skip

    return walk


def test_a_red_probes_up_the_ladder_then_walks_up_to_the_rung_that_refutes():
    ladder = rungs(Rung(6, 4))  # 2x1 3x2 4x3 6x4
    seen: list = []
    answers = {
        (NEXT, False): "unknown",
        (Rung(4, 3), True): "refuted",
        (Rung(4, 3), False): "refuted",
    }
    got = climb("red", ladder, 100.0, fake(answers, seen))
    assert got.verdict == "refuted" and got.refuted.rung == Rung(4, 3) and not got.refuted.probe
    assert got.ladder == "2x1:sV 3x2:s? 4x3:fR"
    # every probe before any walk: the cheap runs reach the failing rung whatever the walks cost
    assert [p for _, _, p in seen] == [True, True, True, False, False, False]
    # each walk a share of what is left, the refuting rung all of it
    shares = {(r, p): b for r, b, p in seen}
    assert shares[(SMALL, False)] < 40 and shares[(Rung(4, 3), False)] > 90
    assert Rung(6, 4) not in {r for r, _, _ in seen}  # nothing above the failing probe


def test_a_walk_that_fails_below_the_failing_probe_refutes_there():
    answers = {(NEXT, True): "refuted", (NEXT, False): "refuted", (SMALL, False): "refuted"}
    got = climb("red", [SMALL, NEXT], 100.0, fake(answers, []))
    assert got.refuted.rung == SMALL and got.ladder == "2x1:sR 3x2:f"


def test_a_red_whose_walk_finds_nothing_is_refuted_by_its_probe_not_exhausted():
    seen: list = []
    got = climb(
        "red", [SMALL], 10.0, fake({(SMALL, True): "refuted", (SMALL, False): "unknown"}, seen)
    )
    assert got.verdict == "refuted" and got.refuted.probe and not got.deciding.exhausted


def test_a_green_climbs_while_verified_and_names_where_the_budget_ran_out():
    seen: list = []
    got = climb("green", rungs(Rung(6, 4)), 100.0, fake({(Rung(4, 3), False): "unknown"}, seen))
    assert got.verdict == "unknown" and got.verified.rung == NEXT and got.stopped == Rung(4, 3)
    assert all(not p for _, _, p in seen)  # a green is walked, not probed
    whole = climb("green", [SMALL, NEXT], 100.0, fake({}, []))
    assert whole.verdict == "verified" and whole.stopped is None
    # no budget left for the next rung: it is named where the budget ran out, not walked
    cut = climb("green", [SMALL, NEXT], 0.0, fake({}, []))
    assert cut.walks == [] and cut.stopped == SMALL and cut.ladder == "2x1:-"


def test_a_red_verified_at_the_smallest_bound_is_refuted_up_the_ladder():
    red, green = (next(c for c in gallery.gallery_cells(LATE_HOP, arm)) for arm in ("red", "green"))
    # the verdict property (any end not served): the cell's expectation names rid 0 at pass
    # 3, which only its own load reaches (tests/sim/test_gallery_expect.py)
    up = climb("red", [SMALL, NEXT], 30.0, gallery.walker(red, 20000, expectation=False))
    assert up.ladder == "2x1:sV 3x2:fR"
    assert up.verdict == "refuted" and up.refuted.rung == NEXT and up.refuted.exhausted
    assert up.refuted.failure.startswith("stopped: decision names rid")
    # red arm: the smallest bound alone (its probe and walk) reads the red as verified
    assert Climb("red", SMALL, [w for w in up.walks if w.rung == SMALL]).verdict == "verified"
    # the green stays verified at the bound the red is verified at
    assert climb("green", [SMALL], 30.0, gallery.walker(green, 20000)).verdict == "verified"


def test_the_refuting_rungs_trace_is_no_longer_than_plain_searchs_shortest():
    red = next(c for c in gallery.gallery_cells(LATE_HOP, "red"))
    walk = ["explore.clock=idle", "explore.strategy=exhaustive", "explore.shrinker.runs=0",
            "explore.schedules=100000", *NEXT.overrides()]  # fmt: skip
    modes = {"plain": ["explore.reduce=none", "explore.exhaustive.cache=false"],
             "cached": ["explore.reduce=sleep", "explore.exhaustive.cache=true"]}  # fmt: skip
    got = {m: search(gallery.compose([*red.overrides, *walk, *o]), echo=lambda *_: None)
           for m, o in modes.items()}  # fmt: skip
    for ex in got.values():
        assert ex.dfs["exhausted"] and ex.dfs["verdict"] == "refuted"
    plain = min(r["steps"] for r in got["plain"].rows if r["verdict"] != "served")
    ran = min(r["steps"] for r in got["cached"].rows if r["verdict"] != "served")
    assert got["cached"].dfs["trace_len"] <= plain
    # red: the cached walk's own shortest failing run is longer than plain search's; the
    # breadth-first search over its graph is what makes the trace the shortest
    assert ran > plain
    assert all(t["replayed"] for t in got["cached"].dfs["traces"].values())
