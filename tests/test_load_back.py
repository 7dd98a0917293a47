"""Who starts a host-tier load-back (sgl-project#1040/#1041, deleted by #1046).

Red (`engine.kv.load_back=admitted`, the #1040 delivery chain): a rank loads a host hit back
only for a rid whose extent a decision published, and rank 0 builds its decision from what it
admitted. A request whose host hit is pending is skipped, so no decision names it, so no extent
is published, so its load never starts: boot 8's self-feeding deferral, stopped here by name
once nothing is in flight and no load is under way. Green (`local`, #1046: every rank loads at
its own match): served. Every rank's 64-token pool evicts to its host tier; sim transport, pp=2,
and one red arm over real gloo processes.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from ppx_helpers import SHORT_PREFIXES, assert_refused, compose, design, on_gloo

HOST = [
    "pp=2",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    "engine/admission=decision",
    "engine/guard=rid",
    "faults=host_prefetch",
    "faults.pool.tokens=64",
    "engine.kv.pool_tokens=64",
    *SHORT_PREFIXES,
    "engine.kv.host_tier=true",
    "engine.kv.prefetch_ms=[2,300]",
]
ADMITTED = "engine.kv.load_back=admitted"
STARVED = re.compile(r"load-back starved: 24 passes with rids \[(\d+)\] waiting, nothing in flight")


def test_red_a_pending_host_hit_is_never_published_and_starves(engine):
    s, _ = engine(*HOST, ADMITTED)
    assert s["verdict"] == "stopped", s["reason"]
    assert STARVED.search(s["reason"]) is not None, s["reason"]
    assert s["load_back_deferred"] >= 24 and s["oracle_mismatches"] == 0


def test_green_each_rank_loads_at_its_own_match_and_serves(engine):
    s, _ = engine(*HOST)  # load_back=local, the default
    assert s["verdict"] == "served", s["reason"]
    assert s["served"] == 12 and s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0
    assert s["load_back_deferred"] == 0


def test_the_default_is_local():
    assert compose(*HOST).engine.kv.load_back == "local"


def test_red_over_real_gloo_processes(ppx_run):
    gloo = on_gloo(HOST)
    proc, s, _ = ppx_run(*gloo, ADMITTED, "watch.max_run_s=60", "watch.stall_s=20", timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "stopped", s["reason"]
    assert s["reason"].startswith("load-back starved: "), s["reason"]


def _sched(waiting=(), inflight=0, running=False, loading=False):
    host = SimpleNamespace(loading={"k": 1} if loading else {})
    return SimpleNamespace(
        waiting=[SimpleNamespace(rid=r) for r in waiting],
        num_inflight=inflight,
        running=[[1]] if running else [[]],
        cache=SimpleNamespace(host=host),
    )


def test_the_gate_and_the_starvation_bound():
    gate = design("engine.kv.load_back", "admitted", {"engine.liveness.livelock_passes": 3})
    assert not gate.may_load(5)
    gate.published([5])
    assert gate.may_load(5) and not gate.may_load(6)
    # anything that can still move resets the count: work in flight, residents, a load
    for busy in (_sched([6], inflight=1), _sched([6], running=True), _sched([6], loading=True)):
        assert gate.starved(busy) is None and gate.idle_passes == 0
    assert gate.starved(_sched([6])) is None and gate.starved(_sched([6])) is None
    assert "rids [6] waiting" in gate.starved(_sched([6]))
    local = design("engine.kv.load_back", "local", {"engine.liveness.livelock_passes": 1})
    assert local.may_load(6) and local.starved(_sched([6])) is None  # never gated


REFUSED = {
    "unknown value": ([*HOST, "engine.kv.load_back=told"], "engine.kv.load_back='told': local"),
    "no host tier": (
        [*[o for o in HOST if o != "engine.kv.host_tier=true"], ADMITTED],
        "needs engine.kv.host_tier=true",
    ),
    "rank_local": (
        [*HOST, "engine/admission=rank_local", "engine/ordering=upstream", ADMITTED],
        "needs a decision to publish extents",
    ),
    "pp=1": ([*HOST, "pp=1", "engine.kv.prefetch_ms=[2]", ADMITTED], "needs pp >= 2"),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_validation_refuses_with_one_line(overrides, message):
    assert_refused(overrides, message)
