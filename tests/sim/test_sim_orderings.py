"""The ordering matrix on the simulator: every historical wiring wedges under every schedule
tried, with the cycle its preset names; the reference orderings serve under every schedule
tried. The same RankLoop, policies and channels as the gloo runs (tests/test_orderings.py)."""

from __future__ import annotations

import pytest
from ppx_helpers import compose

from ppx.sim.explore import explore

SMALL = ["+exp=micro_load", "pp=3", "logger=none"]

WEDGES = {
    # preset: (cycle ranks, words on the cycle) -- as conf/engine/ordering/<preset>.yaml says
    "flush_before_decision": ([0, 1], ["flush chain", "recv decision"]),
    "blocking_lap": ([0, 1, 2], ["recv lap", "recv decision"]),
    "decision_after_launch": ([0, 1], ["flush proxy", "recv decision"]),
}


def cycle_ranks(cycle: str) -> list[int]:
    return sorted({int(w[4:]) for w in cycle.replace("]->", " ").split() if w.startswith("rank")})


def run(tmp_path, strategy: str, n: int, *overrides: str):
    cfg = compose(*SMALL, f"explore.strategy={strategy}", f"explore.schedules={n}", *overrides)
    return explore(cfg, str(tmp_path), list(overrides), echo=lambda *_: None)


@pytest.mark.parametrize("preset", sorted(WEDGES))
@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_every_historical_wiring_wedges_under_every_schedule(tmp_path, preset, strategy):
    ex = run(tmp_path, strategy, 12, "engine/admission=decision", f"engine/ordering={preset}")
    ranks, words = WEDGES[preset]
    df = ex.table
    assert set(df["verdict"]) == {"wedged"}, df[["verdict", "reason"]]
    for cycle in df["cycle"]:
        assert cycle_ranks(cycle) == ranks, cycle
        assert all(w in cycle for w in words), cycle
    assert len(ex.failures) >= 1  # the schedule of the first wedge was saved


@pytest.mark.parametrize(
    "admission,ordering", [("decision", "decision_first"), ("rank_local", "upstream")]
)
def test_the_reference_orderings_serve_under_every_schedule(tmp_path, admission, ordering):
    for strategy in ("random", "pct"):
        ex = run(
            tmp_path / strategy,
            strategy,
            15,
            f"engine/admission={admission}",
            f"engine/ordering={ordering}",
        )
        df = ex.table
        assert set(df["verdict"]) == {"served"}, df[["verdict", "reason"]].head()
        assert (df["served"] == 4).all() and not ex.failures
        # the schedules really differ: the interleavings are not all the same run
        assert df["steps"].nunique() > 1 or df["virtual_s"].nunique() > 1


def test_bounded_dfs_covers_the_tree_and_says_so(tmp_path):
    ex = run(
        tmp_path,
        "dfs",
        500,
        "engine/admission=decision",
        "engine/ordering=flush_before_decision",
        "explore.dfs.bound=3",
    )
    assert ex.exhausted is True
    assert ex.covered == len(ex.table) > 1
    assert set(ex.table["verdict"]) == {"wedged"}
