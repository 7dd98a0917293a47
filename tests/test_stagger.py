"""`local < told` read at different pipeline positions: the stagger (the #1071 strand).

Chunked prefill runs ahead of outputs: rank 0 decides chunk k+1 of a request while chunk k is
still in flight in another slot. A follower that answers "how much of this rid do I hold?" with
the chunks whose results came back (`engine.admission.local_extent=completed`) reads its own
extent one chunk behind rank 0's plan: the log's boot_855_1071cut, `told=8192 local=4096` on the
first chunked prefill against an empty store, where no rank could be short of anything.

Red: under the #1071 watchpost (a forwarded refusal that stops) the first continuation stops
the group with told - local = one chunk; under the void era with `void=keep` (the amplifier:
the void freezes the kept request where the pass found it while rank 0's told runs on) the
group livelocks with local exactly one chunk behind told at every told. Green (`planned`, the
default: the extent this rank placed, the same position as rank 0's plan): served.
Sim transport, pp=2, 16-token chunks; one red arm over real gloo processes.
"""

from __future__ import annotations

import os
import re

import pandas as pd
import pytest
from ppx_helpers import GLOO_WATCH, assert_refused, compose, design, on_gloo

from ppx.core import Entry, Req, SlotBatch
from ppx.engine.scheduler import Scheduler

CHUNK = 16
BASE = [
    "pp=2",
    "model=micro",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    f"engine.chunk_size={CHUNK}",
    "workload.num_requests=8",
    "workload.max_new=8",
    "engine.liveness.livelock_passes=24",
]
WATCHPOST = [*BASE, "engine/admission=forwarded", "engine.admission.on_refusal=stop"]
VOID_ERA = [*BASE, "engine/admission=decision", "engine.admission.void=keep"]
COMPLETED = "engine.admission.local_extent=completed"
REFUSAL = re.compile(
    r"rank1 slot=\d+ pass=\d+ told=\[[\d,]+\] reached=\[[\d,]*\]: "
    r"cannot execute rid=(\d+) prefix_len=(\d+) \(local (\d+)\)"
)


def test_red_the_watchpost_stops_on_the_first_staggered_continuation(engine):
    s, d = engine(*WATCHPOST, COMPLETED)
    assert s["verdict"] == "stopped", s["reason"]
    m = REFUSAL.search(s["reason"])
    assert m is not None, s["reason"]
    told, local = int(m.group(2)), int(m.group(3))
    assert told - local == CHUNK, s["reason"]  # one chunk in flight, nothing missing
    assert s["served"] == 0 and s["oracle_mismatches"] == 0


def test_red_the_void_that_keeps_amplifies_the_stagger_into_a_livelock(engine):
    s, d = engine(*VOID_ERA, COMPLETED)
    assert s["verdict"] == "livelocked", s["reason"]
    assert "consecutive voided passes" in s["reason"]
    # the 1068cap / 1069cohort shape: local exactly one chunk behind told, at every told
    tuples = [tuple(map(int, t)) for t in re.findall(r"\((\d+), (\d+), (-?\d+)\)", s["reason"])]
    assert len({told for _, told, _ in tuples}) >= 3, s["reason"]
    assert all(told - local == CHUNK for _, told, local in tuples), s["reason"]
    # the first staggered rid's retractions on rank 1, pass after pass, the same gap
    ev = pd.read_parquet(os.path.join(d, "events.parquet"))
    r = ev[(ev.kind == "retract") & (ev["rank"] == 1)]
    r = r[r.rid == r.rid.iloc[0]].detail.str.extract(r"told=(\d+) local=(-?\d+)").astype(int)
    assert len(r) >= 10 and ((r[0] - r[1]) == CHUNK).all(), r
    assert s["ledger_violations"] == 0


@pytest.mark.parametrize("base", [WATCHPOST, VOID_ERA], ids=["watchpost", "void_keep"])
def test_green_the_planned_extent_serves(engine, base):
    s, _ = engine(*base)  # the default
    assert s["verdict"] == "served", s["reason"]
    assert s["served"] == 8 and s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0
    assert s["staggered_reads"] == 0 and s["refusals"] + s["retractions"] == 0


def test_the_default_is_the_planned_extent():
    assert compose(*WATCHPOST).engine.admission.local_extent == "planned"


def test_red_over_real_gloo_processes(ppx_run):
    gloo = on_gloo(WATCHPOST)
    proc, s, _ = ppx_run(*gloo, COMPLETED, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "stopped", s["reason"]
    m = REFUSAL.search(s["reason"])
    assert m is not None and int(m.group(2)) > int(m.group(3)), s["reason"]


# -- the extent itself ---------------------------------------------------------------------
def _held(computed: int, inflight: list[SlotBatch | None], req: Req) -> tuple[int, int]:
    req.computed = computed
    s = Scheduler(None, len(inflight), chunk_size=16, max_batch=16)  # the extent reads no cache
    s.inflight = inflight
    key = "engine.admission.local_extent"
    return design(key, "planned").held_extent(s, req), design(key, "completed").held_extent(s, req)


def test_completed_subtracts_only_the_chunks_still_ahead_of_their_results():
    req = Req(rid=3, prompt=list(range(64)), max_new=4, admit_seq=2)
    chunk2 = SlotBatch(1, 7, "prefill", [Entry(3, 16, 16, False, True)], incarnation={3: 2})
    assert _held(32, [None, chunk2], req) == (32, 16)
    other = SlotBatch(1, 7, "prefill", [Entry(9, 0, 16, False)], incarnation={9: 1})
    assert _held(32, [None, other], req) == (32, 32)  # another rid's chunk is not this one's
    # a voided pass, one this rank never placed, a rolled-back chunk and an older incarnation
    # hold nothing this rank will still complete
    for skip in (
        SlotBatch(1, 7, "prefill", [Entry(3, 16, 16, False, True)], voided=True),
        SlotBatch(1, 7, "prefill", [Entry(3, 16, 16, False, True)], placed=False),
        SlotBatch(1, 7, "prefill", [Entry(3, 16, 16, False, True)], incarnation={3: 1}),
    ):
        skip.incarnation = skip.incarnation or {3: 2}
        assert _held(32, [None, skip], req) == (32, 32), skip
    rolled = SlotBatch(1, 7, "prefill", [Entry(3, 16, 16, False, True)], incarnation={3: 2})
    rolled.rolled.add(3)
    assert _held(32, [None, rolled], req) == (32, 32)


REFUSED = {
    "unknown value": ([*WATCHPOST, "engine.admission.local_extent=lagged"], "planned | completed"),
    "rank_local": (
        [*BASE, "engine/ordering=upstream", COMPLETED],
        "engine/admission=rank_local has no told",
    ),
    "pp=1": ([*WATCHPOST, "pp=1", COMPLETED], "local_extent=completed needs pp >= 2"),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_validation_refuses_with_one_line(overrides, message):
    assert_refused(overrides, message)
