"""The group's prefetch completion floor (sgl-project#1175/#1176), `engine.admission.prefetch.floor`.

Every rank's pool is 64 tokens and holds a host tier; two 24-token prefixes take turns, so each
evicts the other to the host on every rank. Rank 0's load-back lands in 2 ms, rank 1's in
300 ms: the log's boot, where rank 0 admitted on its own completion. Red (`rank0`): the
follower executing the forwarded row has not landed its load -> the named group STOP. Green
(`group`): rank 0 defers the rid until rank 1's completion rides the lap home, then serves.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
from ppx_helpers import HOST_PREFETCH, Clock, compose, serve_once

from ppx.config import ConfigError
from ppx.core import Req
from ppx.engine.cache.host import HostTier
from ppx.engine.cache.kv import KVCache
from ppx.protocol.prefetch_carrier import (
    COMPLETE,
    CONTRADICTION,
    PENDING,
    Carrier,
    decide,
    fold,
    presence,
    query_code,
    read_query,
)

HOST = ["pp=2", *HOST_PREFETCH, "engine.kv.prefetch_ms=[2,300]"]
SIM = [*HOST, "engine.transport=sim"]
RED_REASON = "forwarded refusal (on_refusal=stop): rank1 slot="


# -- the floor arithmetic ------------------------------------------------------------------
def test_presence_is_the_sum_of_matched_and_loaded_never_the_max():
    assert presence(9000, 9000) == 18000  # max() would say 9000
    # the separating input: the sum covers what rank 0 wants, the max would clamp it
    assert fold({1: (9000, 9000)}, [1]) == (COMPLETE, 18000, 0)
    assert decide(12000, fold({1: (9000, 9000)}, [1]), 2, expired=False).action == "admit"
    assert presence(5, PENDING) is None and presence(5, CONTRADICTION) is None


def test_a_pending_or_silent_peer_is_no_number_never_a_zero():
    rows = {1: (5, PENDING), 2: (30, 0)}
    assert fold(rows, [1, 2]) == (PENDING, 5, 0b010)  # rank 1 named, its 5 only "sure"
    v = decide(24, fold(rows, [1, 2]), 3, expired=False)
    assert (v.action, v.why) == ("defer", "waiting on ranks [1]")  # not a clamp to 0 or 5
    v = decide(24, fold({2: (30, 0)}, [1, 2]), 3, expired=False)
    assert (v.action, v.why) == ("defer", "waiting on ranks [1]")  # silent: the same
    assert decide(24, None, 3, expired=False).why == "waiting on ranks [1, 2]"
    # the bound ran out: tell what every rank certainly holds (the pending rank's tree part)
    v = decide(24, fold(rows, [1, 2]), 3, expired=True)
    assert (v.action, v.prefix) == ("clamp", 5)
    assert decide(24, fold({2: (30, 0)}, [1, 2]), 3, expired=True).prefix == 0  # silent


def test_complete_reports_admit_or_clamp_and_want_zero_admits_unconditionally():
    assert decide(24, fold({1: (0, 24), 2: (24, 0)}, [1, 2]), 3, expired=False).prefix == 24
    v = decide(24, fold({1: (0, 16), 2: (24, 0)}, [1, 2]), 3, expired=False)
    assert (v.action, v.prefix) == ("clamp", 16)  # a terminated load will not grow: no wait
    for want in (0, -3):
        assert decide(want, fold({1: (0, PENDING)}, [1, 2]), 3, expired=False).action == "admit"


def test_a_contradiction_is_read_before_the_want_zero_early_out():
    folded = fold({1: (100, CONTRADICTION), 2: (0, PENDING)}, [1, 2])
    assert folded == (CONTRADICTION, 1, 100)  # never min()'d, never hidden behind a pending
    v = decide(0, folded, 3, expired=False)
    assert v.action == "contradiction" and v.why == "rank1 load terminated short (matched 100)"


def test_the_carrier_defers_then_clamps_at_the_bound_and_counts():
    c = Carrier(rank=0, world=3, bound_s=0.5)
    assert c.admit(7, 24, now=10.0).action == "defer" and c.query(0) == 7
    c.absorb((7, *fold({1: (0, 24), 2: (3, PENDING)}, [1, 2])))
    assert c.admit(7, 24, now=10.25).action == "defer"
    v = c.admit(7, 24, now=10.5)
    assert (v.action, v.prefix) == ("clamp", 3)
    assert c.n["prefetch_deferred"] == 2 and c.n["prefetch_clamped"] == 1 and c.query(1) == -1
    c.absorb((8, *fold({2: (0, 24), 1: (24, 0)}, [1, 2])))
    assert c.admit(8, 24, now=11.0).prefix == 24 and c.n["prefetch_floor_admits"] == 1
    assert read_query(query_code(8, True)) == (8, True)
    assert read_query(query_code(-1, False)) == (-1, False)


# -- a follower's measurement on a real cache + host tier -----------------------------------


def test_a_follower_stamps_pending_then_matched_plus_loaded_then_a_contradiction():
    clock = Clock()
    c = KVCache(num_layers=1, pool_tokens=24, kv_heads=1, head_dim=2, max_reqs=4, max_context=64)
    c.host = HostTier(c.k, c.v, 0.25, clock)
    a = list(range(1, 13))
    serve_once(c, 0, a)
    serve_once(c, 1, list(range(100, 115)))  # a goes to the host
    c.free += c.tree.evict(c.tree.size, c.host.save)
    f, req = Carrier(rank=1, world=2, bound_s=1.0), Req(5, a + [99], max_new=1)
    assert f.measure(c, req) == (0, PENDING)  # its load started: no number
    clock.now += 0.25
    assert f.measure(c, req) == (0, 12)  # landed: presence 0 + 12
    c.free += c.tree.evict(c.tree.size, None)  # gone again, not back on the host
    assert f.measure(c, req) == (0, CONTRADICTION)


# -- the engine: red / green ---------------------------------------------------------------
def test_red_rank0_completion_stops_green_group_floor_defers_and_serves(engine):
    red, _ = engine(*SIM, "engine.admission.prefetch.floor=rank0")
    assert red["verdict"] == "stopped", red["reason"]
    assert red["reason"].startswith(RED_REASON) and "(local -1)" in red["reason"]
    assert red["prefetch_deferred"] == 0
    green, d = engine(*SIM)
    assert green["verdict"] == "served", green["reason"]
    assert green["oracle_mismatches"] == 0 and green["refusals"] == 0
    assert green["prefetch_deferred"] > 0 and green["prefetch_floor_admits"] > 0
    assert green["cached_tokens"] > 0  # the loaded prefixes were used, not recomputed
    ev = pd.read_parquet(os.path.join(d, "events.parquet"))
    named = ev[ev.kind == "prefetch_defer"].detail
    assert len(named) > 0 and named.str.contains("waiting on ranks \\[1\\]").all()


def test_pp3_the_intermediate_follower_stamps_on_the_way_to_the_last_rank(engine):
    # rank 1 (the intermediate hop) is the slow one: its row must ride the decision to rank 2,
    # which folds it into the lap's header
    pp3 = [*SIM, "pp=3", "engine.kv.prefetch_ms=[2,300,2]"]
    red, _ = engine(*pp3, "engine.admission.prefetch.floor=rank0")
    assert red["verdict"] == "stopped" and red["reason"].startswith(RED_REASON)
    green, _ = engine(*pp3)
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0
    assert green["prefetch_deferred"] > 0 and green["prefetch_floor_admits"] > 0


def test_when_the_bound_expires_rank0_clamps_instead_of_over_telling(engine):
    s, _ = engine(*SIM, "engine.admission.prefetch.bound_ms=50")
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0
    assert s["prefetch_clamped"] > 0 and s["refusals"] == 0


def test_gloo_red_rank0_completion_stops_green_group_serves(ppx_run):
    # real processes, wall clock; the deadline: the run's own bound, then the subprocess's
    proc, red, _ = ppx_run(
        *HOST, "engine.admission.prefetch.floor=rank0", "watch.max_run_s=90", timeout=150
    )
    assert red is not None, proc.stderr[-2000:]
    assert red["verdict"] == "stopped", red["reason"]
    assert red["reason"].startswith(RED_REASON) and "(local -1)" in red["reason"]
    # the carrier's lap is header-only and read where rank 0 reads the wire anyway: on gloo
    # (a blocking rendezvous per message) it must not wedge either
    proc, green, _ = ppx_run(*HOST, "watch.max_run_s=90", name="green", timeout=150)
    assert green is not None, proc.stderr[-2000:]
    assert green["verdict"] == "served", green["reason"]
    assert green["prefetch_deferred"] > 0 and green["oracle_mismatches"] == 0


# -- validation ----------------------------------------------------------------------------
REFUSED = {
    "value": (
        ["engine.admission.prefetch.floor=all"],
        "prefetch.floor='all': group | group_pp | rank0",
    ),
    "pp=1": (
        ["pp=1", "engine/admission=forwarded", "engine.admission.prefetch.floor=rank0"],
        "engine.admission.prefetch.floor=rank0 means nothing at pp=1",
    ),
    "no host tier": (
        ["pp=2", "engine/admission=forwarded", "engine.admission.prefetch.floor=rank0"],
        "engine.admission.prefetch.floor=rank0 needs engine.kv.host_tier=true",
    ),
    "decision": (
        [
            "pp=2",
            "engine/admission=decision",
            "engine.kv.host_tier=true",
            "engine.admission.prefetch.floor=rank0",
        ],
        "engine/admission=decision retracts a pending prefetch",
    ),
    "bound": (["engine.admission.prefetch.bound_ms=-1"], "prefetch.bound_ms=-1.0: >= 0"),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_meaningless_combinations_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as e:
        compose(*overrides)
    assert message in str(e.value) and "\n" not in str(e.value)
