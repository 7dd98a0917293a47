"""Orderings per rank and the `collective` / `group` steps (ppx/protocol/ordering.py): a world
collective placed in the pass and a placement by rank parity, composed from YAML presets only
(conf/engine/ordering/collective_*.yaml), wedge for real over gloo with the cycle named through
the collective, and serve where the placement is right."""

from __future__ import annotations

import pytest
from ppx_helpers import shape

from ppx.protocol.ordering import check_per_rank, flat, ordering_for, parse_ordering
from ppx.watch.waitfor import ALL_PEERS, cycle_text, find_cycle, graph

BASE = ["chain", "schedule", "launch", "output", "flush"]


# -- the vocabulary ------------------------------------------------------------------------
def test_collective_and_group_steps_parse_with_their_options():
    steps = parse_ordering(
        [
            "chain",
            {"step": "collective", "op": "barrier"},
            "schedule",
            {"step": "group", "steps": ["decision.send"]},
            "decision.recv",
            "launch",
            "output",
            "flush",
        ]
    )
    assert steps[1].op == "barrier" and steps[3].steps[0].part == "send"
    names = [s.name for s in flat(steps)]
    assert names == ["chain", "collective", "schedule", "decision", "decision", *BASE[2:]]
    assert parse_ordering(["collective", *BASE])[0].op == "all_reduce"  # the default op


@pytest.mark.parametrize(
    "bad,why",
    [
        ({"step": "collective", "op": "gather_scatter"}, "`op` is one of"),
        ({"step": "launch", "op": "barrier"}, "`op` is one of"),
        ({"step": "group"}, "a group holds `steps`"),
        (
            {"step": "group", "steps": [{"step": "group", "steps": ["decision.send"]}]},
            "no group inside",
        ),
        ({"step": "group", "steps": ["launch"]}, "a blocking receive inside an NCCL group"),
        ("launch.send", "unknown ordering step"),
    ],
)
def test_a_malformed_step_is_refused_by_name(bad, why):
    with pytest.raises(ValueError, match=why):
        parse_ordering([*BASE, bad])


def test_the_most_specific_per_rank_key_wins():
    per_rank = {"odd": ["chain", "collective", *BASE[1:]], "last": BASE[::-1], "2": BASE}
    names = [[s.name for s in ordering_for(BASE, per_rank, r, 4)] for r in range(4)]
    assert names[0] == BASE  # even, first: the shared steps
    assert names[1][1] == "collective"  # odd, middle: its parity
    assert names[2] == BASE  # its number beats its parity and its position
    assert names[3] == BASE[::-1]  # last beats odd


def test_a_per_rank_key_naming_no_rank_is_refused():
    with pytest.raises(ValueError, match="per_rank key 'third'"):
        check_per_rank({"third": BASE})
    with pytest.raises(ValueError, match=r"per_rank.odd: ordering lacks the 'flush' step"):
        check_per_rank({"odd": BASE[:-1]})


def test_bad_per_rank_key_exits_before_anything_spawns(ppx_run):
    proc, summary, _ = ppx_run(
        "pp=2", "engine.transport=sim", "++engine.ordering.per_rank={center:[chain]}"
    )
    assert proc.returncode != 0 and summary is None
    assert "engine.ordering.per_rank key 'center'" in proc.stderr


# -- the wait-for graph of a collective ------------------------------------------------------
def _rec(rank: int, op: str, peer: int, kind: str = "any", seq: int = 1) -> dict:
    return {"rank": rank, "op": op, "peer": peer, "kind": kind, "slot": 0, "pass_id": 3, "seq": seq}


def test_a_collective_waits_on_every_rank_not_inside_it():
    records = [
        _rec(0, "collective", ALL_PEERS),
        _rec(1, "recv", 0, "proxy"),
        _rec(2, "collective", ALL_PEERS),
    ]
    g = graph(records)
    assert sorted((e["src"], e["dst"]) for e in g["edges"]) == [(0, 1), (1, 0), (2, 1)]
    assert (
        cycle_text(find_cycle(g))
        == "rank0 -[collective slot=0]-> rank1 -[recv proxy slot=0]-> rank0"
    )


def test_ranks_that_are_all_inside_one_collective_wait_on_nobody():
    records = [_rec(r, "collective", ALL_PEERS) for r in range(3)]
    assert graph(records)["edges"] == [] and find_cycle(graph(records)) is None
    records[2] = _rec(2, "collective", ALL_PEERS, seq=2)  # another collective: a mismatch
    assert find_cycle(graph(records)) is not None


# -- the gallery pairs, over real gloo processes -----------------------------------------------
GLOO = ["pp=2", "engine/admission=rank_local", "workload.num_requests=6", "workload.max_new=4"]
PAIRS = {
    "collective_every_rank": "rank0 -[collective]-> rank1 -[recv output]-> rank0",
    "collective_parity_split": "rank0 -[collective]-> rank1 -[recv proxy]-> rank0",
}


@pytest.mark.parametrize("ordering", sorted(PAIRS))
def test_a_misplaced_collective_wedges_over_gloo_naming_it(engine, ordering):
    s, _ = engine(*GLOO, f"engine/ordering={ordering}", "watch.stall_s=3")
    assert s["verdict"] == "wedged", s["reason"]
    assert shape(s["cycle"]) == PAIRS[ordering]


@pytest.mark.parametrize("ordering", ["collective_last_early", "collective_parity"])
def test_a_collective_placed_by_position_or_parity_serves_over_gloo(engine, ordering):
    s, _ = engine(*GLOO, f"engine/ordering={ordering}")
    assert s["verdict"] == "served" and s["served"] == 6 and s["oracle_mismatches"] == 0, s


def test_a_group_step_serves_on_the_nccl_model(engine):
    # the decision's send (rank 0's, and each follower's forward once received) issued as one
    # NCCL group: it starts at the group's end
    steps = (
        "[chain,schedule,decision.recv,{step:group,steps:[decision.send]},launch,output,lap,flush]"
    )
    s, _ = engine(
        "pp=3",
        "engine/admission=decision",
        "engine.transport=sim",
        "sim.semantics=nccl",
        f"engine.ordering.steps={steps}",
        "workload.num_requests=6",
        "workload.max_new=4",
    )
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s["reason"]
