"""Guard switches from the reference log, each red (the historical design) beside green.

- engine.guard.prefix_clear: serve (#963, default) vs never (the withdrawn mutant): a prefix
  floor that never clears loses reuse on a prefix every rank holds again.
- engine.guard.miss: sentinel (#944, default) vs zero: an unresolved lookup read as local=0
  teaches floors from a number nobody measured (and, as #944(c) recorded, terminates faster,
  which is why "it terminated" is no evidence).
- engine.guard.defer_cap <= 0 disables the bound; escalation is a named `escalation` event.
Runs are on the deterministic sim transport (same rank code as gloo).
"""

from __future__ import annotations

import os

import pandas as pd
from ppx_helpers import SHORT_PREFIXES, SKEW_400, design, make_guard

from ppx.core import UNRESOLVED

SIM = [
    "pp=2",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    "engine/admission=decision",
]
# family A of the admission matrix: a floor over a prefix rank 1 computes again goes stale
HEALS = SKEW_400
HOST = [
    "faults=host_prefetch",
    "faults.pool.tokens=64",
    *SHORT_PREFIXES,
    "engine.kv.host_tier=true",
    "engine.kv.prefetch_ms=[2,300]",
]


def test_a_prefix_floor_clears_when_the_group_serves_the_prefix():
    shared = list(range(100, 124))
    for mode, want in (("serve", 24), ("never", 0)):
        g = make_guard("prefix", defer_cap=3, prefix_clear=mode)
        g.learn(1, shared + [1, 2], told=24, local=0)
        assert g.clamp(2, shared + [9], 24) == 0  # the shortfall is real: clamp
        g.prefix_served(shared + [7, 7])  # the group computed the prefix (a clean return)
        # serve: full reuse again; never (today's behaviour before #963): reuse lost for good
        assert g.clamp(3, shared + [5], 24) == want, mode


def test_red_never_clear_loses_reuse_green_clear_on_serve_keeps_it(engine):
    green, _ = engine(*SIM, *HEALS, "engine/guard=prefix")
    red, _ = engine(*SIM, *HEALS, "engine/guard=prefix", "engine.guard.prefix_clear=never")
    assert green["verdict"] == red["verdict"] == "served"
    assert green["prefix_floors_cleared"] > 0 and red["prefix_floors_cleared"] == 0
    assert green["cached_tokens"] > red["cached_tokens"], (
        green["cached_tokens"],
        red["cached_tokens"],
    )
    assert green["oracle_mismatches"] == red["oracle_mismatches"] == 0


def test_red_a_miss_read_as_zero_invents_floors_green_sentinel_defers_and_escalates(engine):
    green, d = engine(*SIM, *HOST, "engine/guard=rid")
    red, _ = engine(*SIM, *HOST, "engine/guard=rid", "engine.guard.miss=zero")
    assert green["verdict"] == "served" and green["unresolved"] > 0
    assert green["escalations"] > 0
    ev = pd.read_parquet(os.path.join(d, "events.parquet"))
    esc = ev[ev.kind == "escalation"]
    assert len(esc) == green["escalations"] and esc.detail.str.contains("next told=0").all()
    # zero: no rank ever says "I could not measure"; every report becomes a floor
    assert red["unresolved"] == 0 and red["escalations"] == 0
    assert red["guard_floors_learned"] > green["guard_floors_learned"]


def test_defer_cap_at_or_below_zero_disables_the_bound():
    seen = []
    for cap in (0, -1):
        g = make_guard("rid", defer_cap=cap, on_escalate=lambda rid, n: seen.append(rid))
        for _ in range(10):
            g.learn(5, list(range(30)), 20, UNRESOLVED)
            assert g.clamp(5, list(range(30)), 20) is None  # deferred, never escalated
        assert g.n.escalations == 0
    g = make_guard("rid", defer_cap=2, on_escalate=lambda rid, n: seen.append((rid, n)))
    for _ in range(2):
        g.learn(5, list(range(30)), 20, UNRESOLVED)
    assert seen == [(5, 2)] and g.clamp(5, list(range(30)), 20) == 0  # at the cap


def test_the_zero_miss_switch_is_read_on_followers():
    assert design("engine.guard.miss", "zero").read(UNRESOLVED) == 0
    assert design("engine.guard.miss", "sentinel").read(UNRESOLVED) == UNRESOLVED
