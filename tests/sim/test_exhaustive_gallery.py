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
    # transitions, wall, states/s, trace, exhausted, total wall, clock, ladder | failure
    rows = _rows(capsys)
    red, green = rows["red"], rows["green"]
    assert red[1] == "refuted" and red[2] == red[4] == "2x1" and red[10] == "yes"
    assert red[12] == "idle" and red[14] == "|" and red[15] == "wedged:" and 0 < int(red[9])
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


def _rows(capsys) -> dict[str, list[str]]:
    out = capsys.readouterr().out.splitlines()[1:]
    return {r[0]: r for r in (ln[41:].split() for ln in out)}


def test_a_host_tier_cell_walks_on_the_step_clock_where_its_race_is_reached(capsys):
    # #1175: rank 0's host load lands in 2 ms, rank 1's in 300 ms, and rank 0 admits on its
    # own completion. The loads are polled once a pass; on the idle clock the ranks polling
    # them can always run, so time never moves and neither load lands mid-walk
    cell = ["--fixed", "--match", "#1175 prefetch completion floor", "--arm", "red",
            "--requests", "4", "--max-new", "3", "--budget-s", "4"]  # fmt: skip
    assert gallery.main(cell) == 0  # --clock auto: step, for a host tier
    red = _rows(capsys)["red"]
    assert red[12] == "step" and red[1] == "refuted" and red[2] == "4x3"
    assert red[15:18] == ["stopped:", "forwarded", "refusal"]
    # red arm: the same bound on the idle clock never meets the named stop
    assert gallery.main([*cell, "--clock", "idle"]) == 0
    idle = _rows(capsys)["red"]
    assert idle[12] == "idle" and idle[1] == "unknown"


def test_walk_clock_is_idle_unless_a_host_tier_polls_the_clock():
    names = {c.name + " " + c.arm: c for c in gallery.gallery_cells("#1175 prefetch")}
    assert names
    for c in names.values():
        assert gallery.walk_clock(gallery.compose(c.overrides)) == "step"
    for c in names.values():  # the daemon lands a load under choice timing: no poll waits
        assert gallery.walk_clock(gallery.compose([*c.overrides, "faults.timing=choice"])) == "idle"
    for c in gallery.gallery_cells("f31fd5e"):
        assert gallery.walk_clock(gallery.compose(c.overrides)) == "idle"
