"""The chunked-prefill continuation obeys the decision: a follower told to continue a
prefill it never started (its first chunk was retracted) must not admit the request afresh.
Unit level (one follower's apply) with the defect shown, plus the run that exposed it."""

from __future__ import annotations

from ppx_helpers import typed_cfg

from ppx.core import Entry, Kind, Message, Req
from ppx.engine.admission import codec
from ppx.engine.admission.follow import Follower
from ppx.engine.cache.kv import KVCache
from ppx.engine.loop import PassState
from ppx.engine.scheduler import Scheduler
from ppx.protocol.registry import Protocol


class _Board:
    def add(self, *a):
        pass


class _Events:
    def emit(self, *a, **k):
        pass


class _Context:
    """The part of a rank's context a follower reads."""

    rank, world, is_first, is_last, epoch = 1, 2, False, True, 0

    def __init__(self):
        self.cfg = typed_cfg(
            {"engine.admission.name": "decision", "engine.liveness.livelock_passes": 8}
        )
        self.sched = Scheduler(KVCache(1, 256, 1, 2, 8, 256), 2, 64, 8)
        self.board, self.events = _Board(), _Events()

    def stop(self, reason, p=None):
        raise AssertionError(reason)


def _follower_with_cached_prefix():
    loop = _Context()
    s = loop.sched
    req = Req(15, list(range(1, 130)), max_new=4)
    # this rank holds the first 64 tokens in its tree (e.g. a host load landed) but never
    # ran the first chunk of this admission: it retracted it
    done = Req(99, list(range(1, 65)) + [7], max_new=1)
    s.add([done])
    s.cache.admit(done, 0, 70)
    s.cache.extend(done, 65)
    s.cache.commit(done)
    s.cache.release(done)
    del s.reqs[99]
    s.waiting.clear()
    s.add([req])
    return loop, req


def _decision(entry: Entry) -> Message:
    return Message(
        Kind.DECISION,
        1,
        917,
        0,
        aux=(codec.MODES["prefill"], 1, entry.rid),
        tensors=[codec.encode([entry])],
    )


def test_a_continuation_this_rank_never_started_is_retracted():
    loop, req = _follower_with_cached_prefix()
    follower = Follower(loop, Protocol(loop.cfg), {"retractions": 0})
    p = PassState(
        917, 1, scheduled=True, decision=_decision(Entry(15, 64, 64, False, continues=True))
    )
    follower.apply(p)
    assert p.batch.voided and p.batch.obs == [[1, 15, 64, 0]]
    assert req.row == -1 and req in loop.sched.waiting  # nothing admitted behind rank 0's back


def test_without_the_continuation_flag_the_same_chunk_is_admitted_afresh():
    """Red arm: the defect the flag closes. An entry that does not say it continues looks
    like a fresh admission whose told (64) this rank's tree covers, so it is admitted while
    rank 0 continues a prefill: the two ranks now hold different states for rid 15."""
    loop, req = _follower_with_cached_prefix()
    follower = Follower(loop, Protocol(loop.cfg), {"retractions": 0})
    p = PassState(917, 1, scheduled=True, decision=_decision(Entry(15, 64, 64, False)))
    follower.apply(p)
    assert not p.batch.voided and req.row >= 0 and req.computed == 128
