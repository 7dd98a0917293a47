"""The gallery, exhaustively (python -m ppx.sim.gallery): one command, a row per cell. A red
arm is refuted with its shortest trace and its green verified at the same bound; a walk the
wall budget (explore.budget_s) ends is `unknown`, never `verified`."""

from __future__ import annotations

from explore_helpers import explore_in

from ppx.sim import gallery

SMALL = ["pp=2", "engine/admission=decision", "engine/ordering=decision_first",
         "workload.num_requests=2", "workload.max_new=1", "explore.clock=idle",
         "explore.strategy=exhaustive", "explore.schedules=100000", "explore.shrinker.runs=0"]  # fmt: skip


def test_the_gallery_refutes_the_red_and_verifies_the_green(capsys):
    assert gallery.main(["--match", "f31fd5e", "--requests", "2", "--max-new", "1"]) == 0
    # after the cell's name (40 columns): arm, verdict, states, transitions, wall, states/s,
    # trace, depth, failure
    rows = {r[0]: r for r in (ln[41:].split() for ln in capsys.readouterr().out.splitlines()[1:])}
    red, green = rows["red"], rows["green"]
    assert red[1] == "refuted" and red[8] == "wedged:" and 0 < int(red[6]) <= int(red[7])
    assert green[1] == "verified" and green[6] == "-" and int(green[2]) > int(red[2])


def test_a_wall_budget_ends_the_walk_unknown(tmp_path):
    whole = explore_in(tmp_path / "whole", *SMALL)
    assert whole.dfs["exhausted"] and whole.dfs["verdict"] == "verified"
    cut = explore_in(tmp_path / "cut", *SMALL, "explore.budget_s=1e-9")
    assert not cut.dfs["exhausted"] and cut.dfs["verdict"] == "unknown"
    assert cut.dfs["states"] < whole.dfs["states"]
    # the budget is looked at inside a run too: the first run is cut, not run to its end
    # (a stall's single run of 8,000 steps outlasted a 20 s budget by 180 s)
    assert cut.dfs["runs"] == 0 and whole.dfs["runs"] > 0
