"""Livelock as a fair cycle of the state graph, on the gallery's #630 told sequence (pp=3,
rank 1's match stops at 64, rank 2's at 50; 2 requests, max_new 1): the red (no guard) is
refuted by a fair cycle, confirmed by pumping it, its trace far shorter than the pass-count
bound's and its schedule replayable; the green (the rid floor) is verified with no cycle.
Red arms: the concrete fingerprint (counters kept) closes no cycle on the red, and an
abstraction that merges every state finds cycles on the green that the pump refuses.

`engine.liveness.livelock_passes=6` (the cell has 24) keeps each run of the red short: the bound
still ends the pumped run, after the three laps the pump reads."""

from __future__ import annotations

import json
import os

import pytest
from explore_helpers import explore_in, replay

from ppx.sim import gallery
from ppx.sim.exhaustive import ExhaustiveWalker, walk_to_the_end
from ppx.sim.exhaustive_run import counts, livelocks, summary_keys
from ppx.sim.fingerprint import Fingerprint
from ppx.sim.liveness import pump
from ppx.sim.liveness_forms import Abstraction
from ppx.sim.liveness_graph import fair_cycles
from ppx.sim.liveness_report import FILE, describe
from ppx.sim.merge import Exploration
from ppx.sim.runner import Runner
from ppx.sim.schedule import load

CELL = "#630 told sequence"
BOUND = ["workload.num_requests=2", "workload.max_new=1", "explore.clock=idle",
         "explore.strategy=exhaustive", "explore.shrinker.runs=0", "explore.schedules=20000",
         "engine.liveness.livelock_passes=6"]  # fmt: skip
FAIR = "livelocked: fair cycle"


def overrides(arm: str) -> list[str]:
    [(_, _, ov)] = [c for c in gallery.cells(CELL, arm) if c[0] == CELL]
    return [*ov, *BOUND]


class Concrete(Abstraction):
    """The red arm's 'abstraction': the concrete fingerprint, counters and all."""

    def of(self, sched):
        return Fingerprint.of(self, sched), ()


def walk(arm: str, abstraction_type=Abstraction) -> tuple[Runner, ExhaustiveWalker]:
    """The exhaustive walk of one arm, by hand, with the abstraction given."""
    from explore_helpers import explorer_cfg

    runner = Runner(explorer_cfg(*overrides(arm)))
    inputs = runner.inputs
    w = ExhaustiveWalker(True, True, Fingerprint(inputs), abstraction_type(inputs))
    return runner, walk_to_the_end(runner, w)


@pytest.fixture(scope="module")
def red(tmp_path_factory):
    out = tmp_path_factory.mktemp("red")
    return out, explore_in(out, *overrides("red"))


def test_the_red_is_refuted_by_a_fair_cycle_with_a_short_trace(red):
    out, ex = red
    d = ex.dfs
    assert d["verdict"] == "refuted"
    [cycle] = [c for c in d["livelock"] if c["confirmed"]]
    assert cycle["key"].startswith(FAIR) and cycle["fair"] and cycle["lap_len"] > 0
    assert cycle["pumped"].startswith("livelocked: livelock: 6 consecutive voided passes")
    # the pass-count bound's own failure needs every voided pass; the cycle only its entry
    bound = next(k for k in d["traces"] if k.startswith("livelocked: livelock:"))
    assert d["traces"][cycle["key"]]["trace_len"] < d["traces"][bound]["trace_len"]
    # every counter the lap moves, it moves by the same amount on two laps (the pump's check)
    assert any(cycle["shift"]) and cycle["abstract_states"] >= cycle["lap_len"] > 1
    # the lap's states in the post-mortem's terms, beside summary.json
    on_disk = json.load(open(os.path.join(out, FILE)))
    states = next(c for c in on_disk if c["confirmed"])["cycle"]
    assert len(states) == cycle["lap_len"]
    rank0 = states[0]["tasks"][0]
    assert rank0["task"] == "rank0" and "1" in rank0["rids"] and len(rank0["told_local"]) == 3
    assert {tuple(s["tasks"][0]["told_local"]) for s in states} <= {(1, 120, 64), (1, 138, 64)}
    assert summary_keys(ex)["exhaustive"]["livelock"][0]["key"] == cycle["key"]


def test_the_fair_cycle_schedule_replays_to_the_livelock(red, tmp_path):
    out, ex = red
    key = next(k for k in ex.failures if k.startswith(FAIR))
    s = replay(tmp_path / "run", overrides("red"), ex.paths[key])
    # the file records the pumped run's own end: `python -m ppx.replay` says "reproduced"
    recorded = load(ex.paths[key])
    assert s["verdict"] == recorded.verdict == "livelocked" and s["reason"] == recorded.reason


def test_the_green_is_verified_with_no_cycle(tmp_path):
    # without sleep sets the graph holds every transition of every state: no cycle the
    # abstraction can see is missing from it
    ex = explore_in(tmp_path, *overrides("green"), "explore.reduce=none")
    assert ex.dfs["verdict"] == "verified" and ex.dfs["livelock"] == []
    assert not ex.failures and not os.path.exists(os.path.join(tmp_path, FILE))


def test_red_arm_the_counters_make_every_state_new():
    runner, w = walk("red", Concrete)
    assert w.stats.states > 50  # the walk ran through the livelock's voided passes
    assert fair_cycles(w.graph, w.start, w.abstract, w.progress) == []


def test_red_arm_a_too_coarse_abstraction_is_refused_by_the_pump():
    runner, w = walk("green")
    one = dict.fromkeys(w.abstract, b"one")  # every state merged: cycles everywhere
    lassos = fair_cycles(w.graph, w.start, one, w.progress)
    assert lassos
    ab = w.abstraction
    assert ab is not None
    pumped = [pump(runner, lasso, ab, describe) for lasso in lassos[:3]]
    assert not any(p.confirmed for p in pumped) and all(p.why for p in pumped)


def test_a_budget_spent_leaves_the_cycles_unpumped_and_the_walk_unknown():
    runner, w = walk("green")
    w.abstract = dict.fromkeys(w.abstract, b"one")  # cycles everywhere (the arm above)
    assert w.exhausted and fair_cycles(w.graph, w.start, w.abstract, w.progress)
    w.deadline = 0.0  # explore.budget_s spent as the walk ended
    cycles = livelocks(runner, w, Exploration(rows=[]), {}, echo=lambda *_: None)
    assert cycles and all(c["confirmed"] is None and "budget_s" in c["why"] for c in cycles)
    assert counts(w, [], {}, 1.0, livelock=cycles)["verdict"] == "unknown"
    # red arm: the same walk with its cycles pumped (and refused) is verified
    w.deadline = None
    pumped = livelocks(runner, w, Exploration(rows=[]), {}, echo=lambda *_: None)
    assert pumped and not any(c["confirmed"] for c in pumped)
    assert counts(w, [], {}, 1.0, livelock=pumped)["verdict"] == "verified"
