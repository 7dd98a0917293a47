"""Which mechanism groups a design cannot fire (ppx/sim/design_scope.py), decided from its
config, checked against runs of the design: a group a run fires is never absent, and the
exploration's `mechanisms_missing` lists only what the design has."""

from __future__ import annotations

import io

import pytest
from explore_helpers import explorer_cfg

from ppx.sim.coverage import Coverage, fired
from ppx.sim.design_scope import absent, open_switches
from ppx.sim.runner import Runner
from ppx.sim.scenario import Batching, Flips, Load, Pressure, Scenario, compose, flips_refused
from ppx.sim.strategy import RandomStrategy

DECISION = ["pp=3", "engine/admission=decision", "engine/ordering=decision_first"]
NO_DECISION = {"voids", "floors_learned", "defers", "escalations"}
NO_GUARD = {"floors_learned", "escalations"}
# design -> (overrides, the groups absent, groups its runs below fire: each one the rule must
# not call absent)
DESIGNS = {
    "rank_local": (["pp=3"], NO_DECISION, {"refusals", "carried_continuations", "retractions"}),
    "rank_local, continuations=one named": (
        ["pp=3", "engine.admission.continuations=one"],
        NO_DECISION | {"refusals"},
        {"carried_continuations", "retractions"},
    ),
    "decision, guard rid": (
        [*DECISION, "engine/guard=rid"],
        set(),
        {"voids", "floors_learned", "defers", "refusals", "carried_continuations", "cutovers"},
    ),
    "decision, guard off": (DECISION, NO_GUARD, {"voids", "defers", "refusals"}),
    "decision, defer_cap=0": (
        [*DECISION, "engine/guard=rid", "engine.guard.defer_cap=0"],
        {"escalations"},
        {"floors_learned", "voids"},
    ),
    "forwarded": (
        ["pp=3", "engine/admission=forwarded", "engine/ordering=decision_first"],
        NO_GUARD,
        {"refusals", "defers"},
    ),
}


def _scenarios(open_: frozenset[str]) -> list[Scenario]:
    """A flip mid-prefill that carries (with what the design leaves open), a follower's pool
    cut under two shared prefixes (a floor), and a slow load-back with flips that void."""
    carry = Flips(
        every=7,
        max_flips=2,
        continuation="survive" if "flip.continuation" in open_ else "retract",
        due="clock" if "flip.due" in open_ else "drained",
        per_slot="engine.admission.continuations" in open_,
    )
    long = Load(4, prefix_len=40, prompt_min=8, prompt_max=12, max_new=4, concurrency=4)
    return [
        Scenario(long, Batching(8, 16), flips=carry),
        Scenario(
            Load(3, num_prefixes=2, prefix_len=40, max_new=3, concurrency=3),
            pressure=Pressure(pool_rank=1, pool_tokens=64),
        ),
        Scenario(
            Load(3, prefix_len=24),
            Batching(8, 2),
            Pressure(pool_rank=1, pool_tokens=64, host_rank=1, prefetch_ms=50.0),
            flips=Flips(every=4, max_flips=2, inflight="void"),
        ),
    ]


def _fired_in_runs(overrides: list[str]) -> set[str]:
    base = explorer_cfg(*overrides)
    got: set[str] = set()
    for sc in _scenarios(open_switches(base, overrides)):
        got |= fired(Runner(compose(base, sc), io.StringIO()).run(RandomStrategy(0)).counters)
    return got


@pytest.mark.parametrize("design", list(DESIGNS))
def test_a_group_a_run_of_the_design_fires_is_never_absent(design):
    overrides, want_absent, fires = DESIGNS[design]
    base = explorer_cfg(*overrides)
    why = absent(base, open_switches(base, overrides), flips_refused(base))
    assert set(why) == want_absent
    assert all(isinstance(line, str) and "\n" not in line and line for line in why.values())
    got = _fired_in_runs(overrides)
    assert got >= fires  # the runs reach what the design has: the check below is no tautology
    assert not got & set(why), f"absent yet fired: {got & set(why)}"


def test_rank_locals_refusals_are_the_959_guards_so_a_rule_by_policy_alone_is_refuted():
    """Red arm: "rank_local decides nothing, so nothing refuses" is the rule one would write
    from the admission policy alone; a continuation per slot carried into the one-slot TP plan
    makes the #959 guard refuse (second_continuation_refusals) in that design too."""
    base = explorer_cfg("pp=3")
    by_policy = absent(base, open_switches(base), flips_refused(base)) | {
        "refusals": "rank 0 decides nothing"
    }
    assert "refusals" in _fired_in_runs(["pp=3"]) & set(by_policy)


def test_a_design_that_refuses_flips_has_no_flip_cutover_or_carry():
    # 4 heads do not shard over the TP phase of 3 ranks: flips are refused, nothing else is
    overrides = ["pp=3", "model.heads=4", "model.kv_heads=4"]
    base = explorer_cfg(*overrides)
    why = absent(base, open_switches(base, overrides), flips_refused(base))
    assert {"flips", "cutovers", "carried_continuations", "retractions"} <= set(why)
    assert "not divisible by pp=3" in why["flips"]
    # green arm: the same design with 12 heads flips
    base = explorer_cfg("pp=3")
    assert not {"flips", "cutovers", "retractions"} & set(
        absent(base, open_switches(base), flips_refused(base))
    )


def test_a_switch_an_override_names_is_the_designs_even_at_its_default():
    base = explorer_cfg(*DECISION)
    assert open_switches(base) == {
        "flip.continuation",
        "flip.due",
        "engine.admission.continuations",
    }
    named = ["engine.admission.continuations=one", "++flip.due=drained"]
    assert open_switches(explorer_cfg(*DECISION, *named), named) == {"flip.continuation"}
    # set to something else than the default: fixed whether or not the override is passed
    base = explorer_cfg(*DECISION, "engine.admission.continuations=per_slot")
    assert "engine.admission.continuations" not in open_switches(base)


def test_missing_lists_only_the_groups_the_design_has():
    cov = Coverage()
    cov.add({"flips": 1, "cutovers": 1})
    why = {"voids": "no decision"}
    d = cov.as_dict(why)
    assert d["mechanisms_absent"] == why
    assert "voids" not in d["mechanisms_missing"] and "refusals" in d["mechanisms_missing"]
    assert "flips" not in d["mechanisms_missing"]
    # red arm: without the design's absences every unfired group is "missing"
    assert "voids" in cov.as_dict()["mechanisms_missing"]


def test_the_printout_says_absent_and_missing_apart():
    from ppx.explore import coverage_lines

    cov = Coverage()
    cov.add({"flips": 1})
    lines = coverage_lines(cov.as_dict({"voids": "rank 0 decides nothing"}))
    assert "ppx.explore: absent from the design: voids (rank 0 decides nothing)" in lines
    never = [line for line in lines if "never fired" in line]
    assert len(never) == 1 and "refusals" in never[0] and "voids" not in never[0]
    assert "flips 1" in lines[0]
