"""Flip churn (issue 26): flips must not starve prefill, and a run that only churns ends
`livelocked`, never `timeout`.

The config: pp=3, the micro model, 6 prompts of 100-200 tokens, chunk 32, a flip every 6 passes
(drain). Under `flip.due=clock` (ppx before issue 26) the 190-token prompt (rid 3) needs 6
chunks and 5 fit between flips; the cutover re-queues it and releases the trees, so it
restarts from zero forever and nothing behind it is admitted: the run used to end `timeout`
after 180 virtual seconds with 2/6 served. `flip.due=drained` (the fork's phase policy: the
phase is governed by drain, not a stopwatch) lets the prompt finish first and serves; the churn
bound (`engine.liveness.livelock_flips`) ends the clock arm `livelocked`, naming rid 3 at 160/190.
"""

from __future__ import annotations

import pytest
from ppx_helpers import GLOO_WATCH, assert_refused, on_gloo, typed_cfg
from timing_helpers import HandTiming

from ppx.core import Req, StopRun
from ppx.engine.board import Board, F, RankBoard
from ppx.engine.cache.kv import KVCache
from ppx.engine.churn import Churn
from ppx.engine.flip_schedule import FlipSchedule
from ppx.engine.scheduler import Scheduler
from ppx.engine.transport.base import Transport
from ppx.protocol.registry import Protocol

CHURN = [
    "pp=3",
    "model=micro",
    "workload=long_prompt",
    "workload.prompt_min=100",
    "workload.prompt_max=200",
    "workload.num_requests=6",
    "engine.chunk_size=32",
    "flip=every_40_passes",
    "flip.every_passes=6",
    "flip.inflight=drain",
    "engine.transport=sim",
]
RED_REASON = (
    "livelock: 32 flips and 31 re-admissions with no token committed since pass 119 "
    "(engine.liveness.livelock_flips=32, flip.due=clock); (rid, re-admissions, computed/len at its "
    "last cutover) repeating: [(3, 31, '160/190')]; queue head [3, 2, 4, 5]"
)


class _Events:
    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def emit(self, kind, pass_id=-1, slot=-1, rid=-1, epoch=0, detail=""):
        self.rows.append((kind, pass_id, rid, detail))


class _Clock(Transport):
    """A transport at time 0 whose moments land at once (fixed timing)."""

    now = staticmethod(lambda: 0.0)


class _Rank0:
    """Rank 0's context as the flip control and the churn bound read it."""

    rank, world, is_first, epoch, phase, num_slots = 0, 3, True, 0, "pp", 3

    def __init__(self, **settings) -> None:
        base = {"flip.enabled": True, "flip.every_passes": 6, "flip.inflight": "drain"}
        self.cfg = typed_cfg({**base, **settings})
        self.t, self.events = _Clock(), _Events()
        self.board = RankBoard(Board(None, 3), 0)
        self.sched = Scheduler(KVCache(1, 1024, 1, 2, 8, 256), 3, 32, 16)

    def stop(self, reason, p=None):
        raise StopRun(reason)


def _prompt(rid: int, n: int) -> Req:
    return Req(rid, [(rid * 7 + i) % 120 + 1 for i in range(n)], max_new=8)


def _prefill(s: Scheduler, req: Req, upto: int, pass_id: int) -> int:
    """Rank 0 runs `req`'s chunks of 32 until `upto` tokens are computed; the next pass."""
    while req.computed < min(upto, req.seq_len):
        e = s.admit_entry(req, 0, 32)
        b = s.place([e], pass_id % 3, pass_id, "prefill")
        s.after_launch(b)
        s.inflight[b.slot] = None
        pass_id += 1
    return pass_id


def _flip(ctx: _Rank0) -> FlipSchedule:
    f = FlipSchedule(ctx, Protocol(ctx.cfg))
    f.started, f.last_cutover_pass = True, 120  # counting since a cutover at pass 120
    return f


def _bounds(ctx: _Rank0) -> tuple[int, int]:
    """engine.liveness.livelock_flips and engine.liveness.livelock_readmits, as the flip schedule reads them."""
    return int(ctx.cfg.engine.liveness.livelock_flips), int(
        ctx.cfg.engine.liveness.livelock_readmits
    )


# -- flip.due: the exact state of the churn at pass 126 ------------------------------------
@pytest.mark.parametrize("due", ["clock", "drained"])
def test_a_due_flip_waits_for_the_prompt_mid_prefill_only_when_drained(due):
    ctx = _Rank0(**{"flip.due": due})
    s, rid3 = ctx.sched, _prompt(3, 190)
    s.add([rid3, _prompt(2, 110)])
    nxt = _prefill(s, rid3, 160, 121)  # 5 chunks since the cutover at pass 120
    assert nxt == 126 and s.chunked is rid3 and rid3.computed == 160
    f = _flip(ctx)
    if due == "clock":  # red: the stopwatch flips now; the cutover drops 160 computed tokens
        assert f.due(126, False, False) and f.deferred == 0
        return
    assert not f.due(126, False, False) and f.deferred == 1  # green: the prompt finishes first
    assert ctx.events.rows == [
        ("flip_wait", 126, 3, "rid=3 mid-prefill 160/190 (flip.due=drained)")
    ]
    _prefill(s, rid3, 190, 126)  # the final chunk: rid 3 is no longer mid-prefill
    assert s.chunked is None and f.due(127, False, False) and f.deferred == 1


def test_the_drain_cap_bounds_the_wait():
    ctx = _Rank0(**{"flip.due": "drained", "flip.drain_cap": 3})
    rid3 = _prompt(3, 190)
    ctx.sched.add([rid3])
    _prefill(ctx.sched, rid3, 32, 121)
    f = _flip(ctx)
    assert [f.due(p, False, False) for p in range(126, 130)] == [False, False, False, True]
    assert f.deferred == 3 and len(ctx.events.rows) == 1  # named once per wait


def test_a_flip_whose_moment_is_chosen_is_due_once_it_lands_never_before_the_count():
    ctx = _Rank0()  # every 6 passes from the cutover at pass 120
    ctx.t = t = HandTiming()
    f = _flip(ctx)
    assert [f.due(p, False, False) for p in range(121, 126)] == [False] * 5 and t.armed == []
    # the count ran out at 126 (fixed timing flips there: the test below), not landed yet
    assert not f.due(126, False, False) and not f.due(127, False, False)
    ((label, moment),) = t.armed  # armed once, when the count ran out
    assert label == "flip due"
    moment.fired = True
    assert f.due(128, False, False)  # green: due at the first look after it lands
    f.cut_over(128)
    assert not f.due(133, False, False) and len(t.armed) == 1  # the next count from 128
    assert not f.due(134, False, False) and len(t.armed) == 2  # a fresh moment


def test_under_a_fixed_timing_the_flip_is_due_at_the_counted_pass():
    f = _flip(_Rank0())
    assert [f.due(p, False, False) for p in range(125, 128)] == [False, True, True]


def test_the_count_starts_at_the_pass_that_takes_the_first_request():
    """Idle passes spun while the frontend starts (their number is the machine's load on
    real processes) do not move the first flip: it comes `every_passes` after the first
    request, wherever that lands."""
    f = FlipSchedule(_Rank0(), Protocol(_Rank0().cfg))
    assert not any(f.due(p, False, False) for p in range(9))  # nine idle passes: no flip
    assert not f.due(9, False, True) and f.last_cutover_pass == 9  # the first request
    assert [f.due(p, False, False) for p in range(10, 16)] == [False] * 5 + [True]
    counted = FlipSchedule(_Rank0(), Protocol(_Rank0().cfg))
    counted.started = True  # red: a count from boot flips at pass 6, 3 passes after arrival
    assert not counted.due(5, False, False) and counted.due(6, False, False)


# -- the churn bound: rank 0's count across cutovers ---------------------------------------
def _churn_once(ctx: _Rank0, churn: Churn, req: Req, pass_id: int) -> None:
    """A cutover retracts `req` at 160/190 and the next phase admits it again."""
    churn.cutover(pass_id, [req])
    ctx.sched.requeue(req)
    _prefill(ctx.sched, req, 160, pass_id + 1)
    churn.check(pass_id + 6)


@pytest.mark.parametrize("bound", [32, 0])
def test_flips_with_no_token_committed_end_livelocked_naming_the_churn(bound):
    ctx = _Rank0(**{"engine.liveness.livelock_flips": bound})
    rid3, waiting = _prompt(3, 190), [_prompt(r, 110) for r in (2, 4, 5)]
    ctx.sched.add([rid3, *waiting])
    _prefill(ctx.sched, rid3, 160, 113)
    churn = Churn(ctx, "clock", *_bounds(ctx))
    ctx.board.add(F.TOKENS, 9)  # rids 0 and 1 were served before pass 119
    churn.check(119)
    if bound == 0:  # red: no bound across flips (the void bound sees no void): timeout
        for i in range(100):
            _churn_once(ctx, churn, rid3, 120 + 7 * i)
        assert churn.flips == 100 and churn.readmits == 100
        return
    for i in range(31):
        _churn_once(ctx, churn, rid3, 120 + 7 * i)
    with pytest.raises(StopRun) as e:
        churn.cutover(337, [rid3])
        ctx.sched.requeue(rid3)  # the cutover re-queues it at the front
        churn.check(338)
    assert str(e.value) == RED_REASON
    assert churn.readmits == 31


def test_a_committed_token_or_an_idle_flip_ends_the_streak():
    ctx = _Rank0(**{"engine.liveness.livelock_flips": 3, "engine.liveness.livelock_readmits": 2})
    req = _prompt(3, 64)
    ctx.sched.add([req])
    churn = Churn(ctx, "drained", *_bounds(ctx))
    _churn_once(ctx, churn, req, 10)
    ctx.board.add(F.TOKENS)  # the phase committed a token: progress
    _churn_once(ctx, churn, req, 20)
    assert churn.flips == 1 and churn.streak_readmits == 1 and churn.readmits == 2
    ctx.sched.requeue(req)
    ctx.sched.finish(req)
    ctx.sched.waiting.clear()
    churn.cutover(30, [])  # nothing waits on the engine: not churn
    assert churn.flips == 0 and churn.streak_readmits == 0
    # the re-admission bound on its own: two re-admitted residents, one flip
    a, b = _prompt(7, 64), _prompt(8, 64)
    ctx.sched.add([a, b])
    _prefill(ctx.sched, a, 32, 31)
    with pytest.raises(StopRun, match="engine.liveness.livelock_readmits=2"):
        churn.cutover(40, [a, b])
        ctx.sched.requeue(a)
        ctx.sched.admit_entry(a, 0, 32)
        ctx.sched.admit_entry(b, 0, 32)
        churn.check(41)


# -- the engine: the config, red and green -----------------------------------------
def test_red_clock_churns_and_ends_livelocked_green_drained_serves(engine):
    # the bound at 8 flips to keep the test short (the gallery cell runs the default 32)
    red, _ = engine(*CHURN, "flip.due=clock", "engine.liveness.livelock_flips=8")
    bounded = RED_REASON.replace("32 flips and 31", "8 flips and 7").replace("(3, 31,", "(3, 7,")
    bounded = bounded.replace("livelock_flips=32", "livelock_flips=8")
    assert red["verdict"] == "livelocked" and red["reason"] == bounded, red["reason"]
    assert red["served"] == 2 and red["flips_deferred"] == 0
    green, _ = engine(*CHURN)
    assert green["verdict"] == "served", green["reason"]
    assert green["served"] == green["submitted"] == 6 and green["oracle_mismatches"] == 0
    assert green["flips"] > 10 and green["flips_deferred"] > 0 and green["readmits"] > 0


def test_gloo_red_clock_churn_is_livelocked_not_timeout(ppx_run):
    # real processes: four of the six prompts (rid 3 among them), the bound at 8 flips
    quick = [*on_gloo(CHURN), "workload.num_requests=4", "engine.liveness.livelock_flips=8"]
    proc, s, _ = ppx_run(*quick, "flip.due=clock", *GLOO_WATCH, timeout=150)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "livelocked", s["reason"]
    assert s["reason"].startswith("livelock: 8 flips and 7 re-admissions with no token")
    assert "repeating: [(3, 7, '160/190')]" in s["reason"] and s["served"] == 2


REFUSED = {
    "value": (["flip=every_2s", "flip.due=later"], "flip.due='later': drained | clock"),
    "clock without flips": (["flip.due=clock"], "flip.due=clock means nothing without flips"),
    "cap": (["flip=every_2s", "flip.drain_cap=0"], "flip.drain_cap=0: >= 1 passes"),
    "bound": (
        ["engine.liveness.livelock_flips=-1"],
        "engine.liveness.livelock_flips=-1: >= 0 (0 = no bound)",
    ),
    "readmits": (
        ["engine.liveness.livelock_readmits=-2"],
        "engine.liveness.livelock_readmits=-2: >= 0",
    ),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_meaningless_churn_settings_are_refused_in_one_line(overrides, message):
    assert_refused(overrides, message)
