"""A follower that cannot honour some of rank 0's entries: the whole pass voided (sgl-project#791
as wired, with #797's void) vs the entry excluded here while its siblings run (#791 as first
landed; #791c's boot instr17: "received hidden_states with 126 row(s) for a batch of 22
token(s)"), `engine.admission.retraction=pass|partial`.

Unit: the fork's own state (rid A told 0 extend 22, rid B told 96 extend 104 that this rank
does not hold) on one follower. End to end on the simulator: rank 1's 400-token pool evicts
shared prefixes rank 0 keeps; partial exclusion stops at rank 1's next proxy receive (rows for
rank 0's batch against its narrower one), and a follower that excludes every entry of a pass
never pulls the proxy sent for it (the wedge #791 was written to remove). Green: the pass
voided group-uniformly with the rid guard serves. One red arm over real gloo processes.
"""

from __future__ import annotations

import pytest
import torch
from ppx_helpers import GLOO_WATCH, SKEW_400, assert_refused, bare_steps, design, on_gloo, typed_cfg

from ppx.core import Entry, Kind, Message, Req
from ppx.engine.admission import codec
from ppx.engine.admission.follow import Follower
from ppx.engine.cache.kv import KVCache
from ppx.engine.loop import PassState
from ppx.engine.scheduler import Scheduler
from ppx.protocol.registry import Protocol

SIM = [
    "engine.transport=sim",
    "pp=2",
    "engine/ordering=decision_first",
    "engine/admission=decision",
    *SKEW_400,
]
PARTIAL = "engine.admission.retraction=partial"
# what the simulator's seeded schedule of this workload gives (deterministic; replayable)
WIDTH_STOP = (
    "proxy width check: rank1 slot=1 pass=23 rows=17 vs tokens=8; upstream batch [4, 5] "
    "vs local [5]"
)


# -- the fork's state, on one follower -------------------------------------------------------
class _Context:
    rank, world, is_first, is_last, epoch, prev = 1, 3, False, False, 0, 0

    def __init__(self, retraction: str) -> None:
        self.cfg = typed_cfg(
            {"engine.admission.name": "decision", "engine.admission.retraction": retraction}
        )
        self.sched = Scheduler(KVCache(1, 512, 1, 2, 8, 512), 3, 256, 8)
        self.events, self.board = _Sink(), _Sink()

    def stop(self, reason, p=None):
        raise AssertionError(reason)


class _Sink:
    def emit(self, *a, **k):
        pass

    def add(self, *a):
        pass


A, B = 51, 57  # the fork's honourable / unhonourable rids, renamed
DECISION = [Entry(A, 0, 22, True), Entry(B, 96, 104, True)]  # 22 + 104 = 126 rows upstream


def _follower(retraction: str):
    ctx = _Context(retraction)
    ctx.sched.add([Req(A, list(range(1, 23)), 4), Req(B, list(range(100, 300)), 4)])
    follower = Follower(ctx, Protocol(ctx.cfg), {"retractions": 0, "refusals": 0, "stops": 0})
    tensor = codec.encode(DECISION)
    msg = Message(Kind.DECISION, 1, 40, 0, aux=(codec.MODES["prefill"], 2, A + B), tensors=[tensor])
    p = PassState(40, 1, scheduled=True, decision=msg)
    follower.apply(p)
    return ctx, follower, p


def test_partial_runs_the_survivor_and_the_next_proxy_carries_rank_0s_rows():
    ctx, follower, p = _follower("partial")
    assert p.batch.rids == [A] and p.batch.num_tokens == 22 and not p.batch.voided
    assert follower.retraction.exclusions == 1 and follower.n["retractions"] == 1
    # the proxy rank 0's batch crosses with: 126 rows and its fingerprint
    fp = torch.tensor([A, 22, B, 104], dtype=torch.int64)
    proxy = Message(Kind.PROXY, 1, 40, 0, tensors=[torch.zeros(126, 4), fp])
    width = design("engine.width_check", "fingerprint")
    steps = bare_steps(ctx, width)
    with pytest.raises(AssertionError) as stop:
        steps.check_proxy(p, proxy)
    assert str(stop.value) == (
        f"proxy width check: rank1 slot=1 pass=40 rows=126 vs tokens=22; upstream batch [{A}, "
        f"{B}] vs local [{A}]"
    )


def test_the_whole_pass_design_voids_and_names_the_entry():
    _, follower, p = _follower("pass")
    assert p.batch.voided and not p.batch.placed and p.batch.rids == [A, B]
    assert p.batch.obs == [[1, B, 96, 0]] and follower.retraction.exclusions == 0


# -- end to end on the simulator ----------------------------------------------------------------
def test_red_partial_exclusion_stops_at_the_next_proxy(engine):
    s, _ = engine(*SIM, PARTIAL)
    assert s["verdict"] == "stopped" and s["reason"] == WIDTH_STOP, s["reason"]
    assert (s["exclusions"], s["voids"], s["served"], s["submitted"]) == (1, 0, 3, 7)


def test_red_a_follower_that_excludes_every_entry_wedges_the_proxy(engine):
    s, _ = engine(*SIM, PARTIAL, "workload.concurrency=1")
    assert s["verdict"] == "wedged", s["reason"]
    assert s["cycle"] == "rank0 -[flush proxy]-> rank1 -[flush lap]-> rank0"


def test_green_the_voided_pass_with_the_rid_guard_serves(engine):
    s, _ = engine(*SIM, "engine/guard=rid")
    assert (s["verdict"], s["served"], s["submitted"]) == ("served", 24, 24)
    assert (s["voids"], s["exclusions"], s["oracle_mismatches"]) == (16, 0, 0)


def test_red_over_real_gloo_stops_by_name(ppx_run):
    proc, s, _ = ppx_run(*on_gloo(SIM), PARTIAL, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "stopped", s["reason"]
    assert s["reason"].startswith("proxy width check: rank1 ") and " vs local [" in s["reason"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["engine.admission.retraction=all"], "engine.admission.retraction='all': pass | partial"),
        ([PARTIAL], "retraction=partial is a design of engine/admission=decision (rank_local"),
        (
            ["engine/admission=forwarded", "engine/ordering=decision_first", PARTIAL],
            "(forwarded executes rank 0's rows and refuses instead)",
        ),
    ],
)
def test_refused_where_it_means_nothing(overrides, message):
    assert_refused(overrides, message)
