"""The gallery, exhaustively (python -m ppx.sim.gallery): one command, a row per cell. At one
fixed bound (`--fixed`) a red arm is refuted with its shortest trace and its green verified
at the same bound; a walk the wall budget (explore.budget_s) ends is `unknown`, never
`verified`. The ladder of bounds is tests/sim/test_gallery_ladder.py."""

from __future__ import annotations

from explore_helpers import explore_in

from ppx.sim import gallery

SMALL = ["pp=2", "engine/admission=decision", "engine/ordering=decision_first",
         "workload.num_requests=2", "workload.max_new=1", "explore.clock=idle",
         "explore.strategy=exhaustive", "explore.schedules=100000", "explore.shrinker.runs=0"]  # fmt: skip


def test_the_gallery_refutes_the_red_and_verifies_the_green(capsys):
    assert gallery.main(["--fixed", "--match", "f31fd5e", "--requests", "2", "--max-new", "1"]) == 0
    # after the cell's name (40 columns): arm, verdict, bound, out_at, top, states,
    # transitions, wall, states/s, trace, exhausted, total wall, ladder | failure
    rows = {r[0]: r for r in (ln[41:].split() for ln in capsys.readouterr().out.splitlines()[1:])}
    red, green = rows["red"], rows["green"]
    assert red[1] == "refuted" and red[2] == red[4] == "2x1" and red[10] == "yes"
    assert red[13] == "|" and red[14] == "wedged:" and 0 < int(red[9])
    assert green[1] == "verified" and green[9] == "-" and int(green[5]) > int(red[5])


def test_bad_bounds_are_refused_before_anything_runs(capsys):
    assert gallery.main(["--budget-s", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err


def test_a_wall_budget_ends_the_walk_unknown(tmp_path):
    whole = explore_in(tmp_path / "whole", *SMALL)
    assert whole.dfs["exhausted"] and whole.dfs["verdict"] == "verified"
    cut = explore_in(tmp_path / "cut", *SMALL, "explore.budget_s=1e-9")
    assert not cut.dfs["exhausted"] and cut.dfs["verdict"] == "unknown"
    assert cut.dfs["states"] < whole.dfs["states"]
    # the budget is looked at inside a run too: the first run is cut, not run to its end
    # (a stall's single run of 8,000 steps outlasted a 20 s budget by 180 s)
    assert cut.dfs["runs"] == 0 and whole.dfs["runs"] > 0
