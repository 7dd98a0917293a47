"""A follower whose lookup reads only its waiting queue (before #797c, boot instr19).

`engine.admission.reconcile=queue` answers "how much of this rid have I computed?" from the
waiting queue alone. Every admitted request leaves that queue and a request mid-prefill lives
in the chunked pointer, so from a prompt's second chunk on the follower reports a
continuation it computed as a miss; the pass is retracted and voided. With
`engine.admission.void=keep` (#797b's park) the voided chunk is parked, the offer stays flat
and the same miss voids every pass: the fork's `test_the_park_alone_leaves_a_flat_livelock`
(efschu/htsglang 4b204740a0632becc75bd4d0fc8eb08a02b79093). The default lookup reads the
chunked pointer (#797c) and serves the same workload without a void. Sim transport, pp=2,
16-token chunks; one red arm over real gloo processes.
"""

from __future__ import annotations

import os
from collections import deque
from types import SimpleNamespace

import pandas as pd
import pytest
from ppx_helpers import GLOO_WATCH, assert_refused, design, on_gloo

from ppx.core import Entry, Req

BASE = [
    "pp=2",
    "model=hash",
    "engine.transport=sim",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "engine.chunk_size=16",
    "workload.num_requests=8",
    "workload.max_new=8",
    "engine.livelock_passes=24",
    "engine.admission.void=keep",
]
QUEUE = "engine.admission.reconcile=queue"
KEY = "engine.admission.reconcile"


def _entry(rid: int, prefix_len: int, continues: bool) -> Entry:
    return Entry(rid=rid, prefix_len=prefix_len, extend_len=16, final=False, continues=continues)


def _sched(req: Req, queued: bool) -> SimpleNamespace:
    """The two places the lookups read: the waiting queue and the chunked pointer."""
    return SimpleNamespace(waiting=deque([req] if queued else []), chunked=None if queued else req)


def test_a_queued_request_is_found_a_continuation_is_a_miss():
    lookup = design(KEY, "queue")
    req = Req(7, list(range(40)), max_new=2)
    assert not lookup.missed(_sched(req, queued=True), req, _entry(7, 0, False), parks=False)
    # chunk 2: the request left the queue at its first admission; the pointer holds it
    held = _sched(req, queued=False)
    assert lookup.held_chunked(held, req, parks=True)  # the rank does hold it ...
    assert lookup.missed(held, req, _entry(7, 16, True), parks=True)  # ... the lookup misses
    assert lookup.counters()["reconcile_misses"] == 1


def test_the_chunked_pointer_is_what_797c_added():
    """The same continuation, asked of the lookup #797c left (`scheduler`): found."""
    req = Req(7, list(range(40)), max_new=2)
    fixed = design(KEY, "scheduler")
    assert not fixed.missed(_sched(req, queued=False), req, _entry(7, 16, True), parks=False)
    assert fixed.counters()["reconcile_misses"] == 0


def test_the_escalation_names_the_places_it_never_reads():
    text = design(KEY, "queue").where()
    assert text.startswith("waiting queue (never the chunked pointer (chunked_req)"), text


def _retractions(run_dir: str) -> pd.DataFrame:
    ev = pd.read_parquet(os.path.join(run_dir, "events.parquet"))
    return ev[(ev.kind == "retract") & (ev["rank"] == 1)]


def test_red_queue_lookup_livelocks_green_default_serves(engine):
    red, d = engine(*BASE, QUEUE)
    green, _ = engine(*BASE)
    assert red["verdict"] == "livelocked", red
    assert "consecutive voided passes" in red["reason"]
    assert red["served"] == 0 and red["ledger_violations"] == 0
    assert red["void_kept"] > 0 and red["unresolved"] > 0, red
    # one rid, its continuation reported unresolved at a flat offer: the park holds the told
    r = _retractions(d)
    assert len(r) >= 10 and r.rid.nunique() == 1, r
    assert r.detail.str.endswith("local=-1").all()
    assert set(r.detail.str.extract(r"told=(\d+)")[0].astype(int)) <= {16, 32}
    assert green["verdict"] == "served" and green["served"] == 8, green
    assert green["voids"] == 0 and green["reconcile_misses"] == 0
    assert green["oracle_mismatches"] == 0 and green["ledger_violations"] == 0


def test_a_miss_read_as_zero_is_instr19s_local_zero(engine):
    """Before #944 the miss answered 0: `told=512 local=0` on a request rank 1 computed."""
    red, d = engine(*BASE, QUEUE, "engine.guard.miss=zero")
    assert red["verdict"] == "livelocked" and red["unresolved"] == 0, red
    r = _retractions(d)
    assert len(r) >= 10 and r.detail.str.endswith("local=0").all(), r


def test_red_over_real_gloo_processes(ppx_run):
    proc, s, _ = ppx_run(*on_gloo(BASE), QUEUE, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "livelocked", s["reason"]
    assert "consecutive voided passes" in s["reason"]


REFUSED = {
    "unknown value": ([*BASE, "engine.admission.reconcile=fifo"], "scheduler | queue"),
    "rank_local": (
        ["pp=2", "engine/admission=rank_local", QUEUE],
        "reconcile=queue means nothing: engine/admission=rank_local",
    ),
    "row_authority": (
        ["pp=2", "engine/ordering=decision_first", "engine/admission=row_authority", QUEUE],
        "never voids nor reconciles a decision",
    ),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_validation_refuses_with_one_line(overrides, message):
    assert_refused(overrides, message)
