"""Continuations carried across a cutover that share a prefix (flip.continuation=survive).

Found by the scenario generator once it drew repeated prompts: at pp=3, two of a prompt's
copies and a third prompt behind the same 24-token prefix, a slot each (per_slot), a flip
on the clock, and rank 2's pool cut to 64 tokens. Rank 2 held the two continuations (38 and
32 computed tokens) in 46 slots, sharing the prefix; the carry copied each one whole into
the new layout, 70 slots, and rank 2 crashed (`KV pool exhausted: need 38, free 32`). The
carry now reuses what an earlier carried request committed to the new layout's tree, as a
prefill would (engine/carry.py `carried_prefix`); the carried rows stay checked against a
fresh prefill (oracle.carry_check). Red arm: the copy per request."""

from __future__ import annotations

from explore_helpers import explorer_cfg

import ppx.engine.carry as carry_mod
from ppx.sim.runner import Runner
from ppx.sim.scenario import Batching, Flips, Load, Pressure, Scenario, compose
from ppx.sim.strategy import RandomStrategy

DESIGN = ["pp=3", "engine/admission=decision", "engine/ordering=decision_first"]
DESIGN += ["engine/guard=rid"]
SHARED = Scenario(
    Load(3, 1, 24, 9, 15, max_new=1, concurrency=3, repeat_count=2),
    Batching(16, 4),
    Pressure(pool_rank=2, pool_tokens=64),
    flips=Flips(6, 1, "drain", continuation="survive", due="clock", per_slot=True),
)


def run():
    return Runner(compose(explorer_cfg(*DESIGN), SHARED)).run(RandomStrategy(0))


def test_carried_continuations_share_their_prefix_in_the_new_layout(monkeypatch):
    reused, prefix = [], carry_mod.carried_prefix

    def spied(new, req):
        reused.append(prefix(new, req))
        return reused[-1]

    monkeypatch.setattr(carry_mod, "carried_prefix", spied)
    green = run()
    assert green.verdict == "served", green.row["reason"]
    assert green.counters["carried_at_flip"] == 2
    # on each of the 3 ranks: the first carried request copies all, the second reuses 24
    assert sorted(reused) == [0, 0, 0, 24, 24, 24]


def test_red_a_copy_per_carried_request_overflows_the_cut_pool(monkeypatch):
    monkeypatch.setattr(carry_mod, "carried_prefix", lambda new, req: 0)
    red = run()
    assert red.verdict == "crashed"
    assert "rank2: RuntimeError: KV pool exhausted: need 38, free 32" in red.row["reason"]
