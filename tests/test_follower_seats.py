"""A follower's own seat count on a forwarded schedule (sgl-project#1153, F2 TRIGGER CLASS).

The log's follower ran its rank-local seat-count gates (the #823 count arm, `batch_full_break`,
`get_num_allocatable_reqs`) on rank 0's forwarded schedule; the count was rank-local, so it said
"full" while the allocator could hold the rows: "PP1 reached 1 of the 2 rids PP0 named
(batch_full_break)". #1153's root fix turned that refusal into a group STOP naming the numbers;
F2 then removed the trigger: on a forwarded schedule a follower's count is no verdict.

Here the rank-local count is the rank's free KV slots per chunk (eviction not counted): under
faults=pool_skew rank 1's tree fills its 400-slot pool, so it counts few seats while its
allocator -- and rank 0, which admits against the smallest pool -- can hold every row.
Red (`follower_seats=veto`): on_refusal=stop stops naming rank, rid and the seat numbers;
on_refusal=void livelocks. Green (`ignore`, the default): served, oracle clean, no refusal.
Sim transport, pp=2; one red arm over real gloo processes.
"""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pandas as pd
import pytest
from ppx_helpers import GLOO_WATCH, assert_refused, compose, design, make_guard, on_gloo

from ppx.core import SEATS_SHORT, Entry
from ppx.protocol.follower_seats import seat_limit

CHUNK = 32
N = 24
BASE = [
    "pp=2",
    "model=micro",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    "faults=pool_skew",
    "faults.pool.tokens=400",
    "workload=random",
    f"workload.num_requests={N}",
    "workload.max_new=8",
    f"engine.chunk_size={CHUNK}",
    "engine.liveness.livelock_passes=24",
    "engine/admission=forwarded",
]
STOP = [*BASE, "engine.admission.on_refusal=stop"]
VOID = [*BASE, "engine.admission.on_refusal=void"]
VETO = "engine.admission.follower_seats=veto"
REFUSAL = re.compile(
    r"rank1 slot=\d+ pass=\d+ told=\[[\d,]+\] reached=\[[\d,]*\]: "
    r"cannot execute rid=(\d+) prefix_len=(\d+) \(local -3\); "
    r"rank1 reached (\d+) of the (\d+) rids rank 0 named \(seat count: "
    rf"min\(max_batch=16, free=(\d+) // chunk={CHUNK}\) = (\d+); allocator available=(\d+)\)"
)


def _check_stop_reason(reason: str) -> None:
    m = REFUSAL.search(reason)
    assert m is not None, reason
    reached, named, free, seats = (int(m.group(i)) for i in (3, 4, 5, 6))
    assert reached == seats == free // CHUNK and reached < named, reason


def test_red_the_follower_seat_count_stops_a_forwarded_schedule(engine):
    s, _ = engine(*STOP, VETO)
    assert s["verdict"] == "stopped", s["reason"]
    assert s["reason"].startswith("forwarded refusal (on_refusal=stop): rank1"), s["reason"]
    _check_stop_reason(s["reason"])
    assert s["seat_vetoes"] >= 1 and s["refusals"] == s["seat_vetoes"]
    assert s["served"] < N and s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0


def test_red_under_the_void_era_the_seat_vetoes_livelock(engine):
    s, d = engine(*VOID, VETO)
    assert s["verdict"] == "livelocked", s["reason"]
    assert "consecutive voided passes" in s["reason"]
    assert f", {SEATS_SHORT})" in s["reason"], s["reason"]  # a seat veto among what repeats
    ev = pd.read_parquet(os.path.join(d, "events.parquet"))
    r = ev[(ev.kind == "refusal") & (ev["rank"] == 1)]
    seat = r[r.detail.str.endswith(f"local={SEATS_SHORT}")]
    assert len(seat) >= 1, r.detail.tolist()
    assert s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0


@pytest.mark.parametrize("base", [STOP, VOID], ids=["stop", "void"])
def test_green_a_forwarded_schedule_ignores_the_follower_count(engine, base):
    s, _ = engine(*base)  # the default: ignore
    assert s["verdict"] == "served", s["reason"]
    assert s["served"] == N and s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0
    # the allocator held every row the count would have refused
    assert s["seat_vetoes"] == 0 and s["refusals"] == 0 and s["voids"] == 0


def test_the_default_is_ignore():
    assert compose(*STOP).engine.admission.follower_seats == "ignore"


def test_red_over_real_gloo_processes(ppx_run):
    gloo = on_gloo(STOP)
    proc, s, _ = ppx_run(*gloo, VETO, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "stopped", s["reason"]
    _check_stop_reason(s["reason"])


# -- the seat arithmetic -------------------------------------------------------------------
def test_seat_limit_counts_free_chunks_capped_by_the_batch():
    assert seat_limit(59, 32, 16) == 1
    assert seat_limit(31, 32, 16) == 0
    assert seat_limit(64, 32, 16) == 2
    assert seat_limit(4000, 32, 16) == 16  # the batch's seat cap
    assert seat_limit(0, 32, 16) == 0


def _sched(free: int, available: int):
    cache = SimpleNamespace(free=list(range(free)), available=available)
    return SimpleNamespace(cache=cache, chunk_size=32, max_batch=16)


def test_veto_refuses_the_rids_beyond_the_count_and_names_the_numbers():
    entries = [Entry(7, 0, 20, True), Entry(9, 4, 12, True), Entry(11, 0, 8, True)]
    veto = design("engine.admission.follower_seats", "veto")
    rows = veto.veto(_sched(free=40, available=300), entries, 1, set())
    assert rows == [[1, 9, 4, SEATS_SHORT], [1, 11, 0, SEATS_SHORT]]
    assert veto.note == (
        "rank1 reached 1 of the 3 rids rank 0 named (seat count: "
        "min(max_batch=16, free=40 // chunk=32) = 1; allocator available=300)"
    )
    assert veto.vetoes == 2
    # a rid refused already (on coverage) is not refused twice
    assert veto.veto(_sched(free=40, available=300), entries, 1, {9}) == [[1, 11, 0, SEATS_SHORT]]
    assert veto.veto(_sched(free=96, available=300), entries, 1, set()) == []
    # the default design never counts seats
    ignore = design("engine.admission.follower_seats", "ignore")
    assert ignore.veto(_sched(free=0, available=0), entries, 1, set()) == []


def test_a_seat_veto_teaches_the_guard_no_floor():
    g = make_guard("prefix", 3)
    g.learn(9, list(range(40)), 24, SEATS_SHORT)
    assert g.floors.rid_floor == {} and g.floors.prefix_floor == {} and g.floors.learned == 0
    assert g.n.seats_short == 1 and g.clamp(9, list(range(40)), 24) == 24


REFUSED = {
    "unknown value": ([*STOP, "engine.admission.follower_seats=cap"], "ignore | veto"),
    "rank_local": (
        [*BASE, "engine/admission=rank_local", "engine/ordering=upstream", VETO],
        "engine/admission=rank_local has no follower",
    ),
    "decision": (
        [*BASE, "engine/admission=decision", VETO],
        "engine/admission=decision retracts on coverage instead",
    ),
    "pp=1": ([*STOP, "pp=1", VETO], "follower_seats=veto needs pp >= 2"),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_validation_refuses_with_one_line(overrides, message):
    assert_refused(overrides, message)
