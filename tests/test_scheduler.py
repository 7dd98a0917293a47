"""Scheduler: chunked prefill across slots, pinning, decode batches, voids re-queue once."""

from __future__ import annotations

from ppx_helpers import upstream_rule

from ppx.core import Req
from ppx.engine.cache.kv import KVCache
from ppx.engine.scheduler import Scheduler


class _Loop:
    def __init__(self, sched):
        self.sched = sched


def _sched(chunk=8, slots=2):
    cache = KVCache(1, 256, 1, 2, 8, 128)
    s = Scheduler(cache, slots, chunk, 8)
    return s, upstream_rule(_Loop(s))


def test_chunked_prefill_spans_passes_and_pins_to_final_slot():
    s, pol = _sched(chunk=8, slots=2)
    s.add([Req(0, list(range(1, 21)), max_new=3)])  # 20 tokens -> 8 + 8 + 4
    b0 = pol.form(0, 0)
    assert b0.entries[0].extend_len == 8 and not b0.entries[0].final
    s.after_launch(b0)
    s.apply_output(0, [])  # a middle chunk samples nothing
    b1 = pol.form(1, 1)
    assert b1.entries[0].prefix_len == 8 and not b1.entries[0].final
    s.after_launch(b1)
    s.apply_output(1, [])
    b2 = pol.form(0, 2)
    assert b2.entries[0].final and b2.entries[0].extend_len == 4
    s.after_launch(b2)
    s.apply_output(0, [42])
    assert s.reqs[0].slot == 0 and s.running[0] == [s.reqs[0]]
    d = pol.form(0, 4)
    assert d.mode == "decode" and d.entries[0].prefix_len == 20


def test_void_requeues_each_request_once_and_keeps_tokens():
    s, pol = _sched(chunk=64, slots=1)
    s.add([Req(0, [1, 2, 3], 4), Req(1, [4, 5, 6], 4)])
    b = pol.form(0, 0)
    assert b.num_reqs == 2
    s.void(b)  # placed, never launched: the allocation is rolled back
    assert [r.rid for r in s.waiting] == [0, 1]
    assert s.cache.ledger()["num_violations"] == 0 and s.cache.reserved == 0
    b = pol.form(0, 1)
    assert b.rids == [0, 1]


def _prefill_ahead():
    """rid 0's 20-token prefill in chunks of 8: the first pass launched, the second chunk
    placed ahead of the first pass's output (chunked prefill runs ahead)."""
    s, pol = _sched(chunk=8, slots=2)
    s.add([Req(0, list(range(1, 21)), max_new=3)])
    first = pol.form(0, 0)
    first.launched = True  # as the rank loop marks it (loop.py, step_launch)
    s.after_launch(first)
    second = pol.form(1, 1)
    assert second.rids == [0] and second.entries[0].prefix_len == 8
    return s, pol, first, second


def test_a_stale_void_leaves_a_request_admitted_again_since_alone():
    # rid 0's prefill spans two passes (8 + 8 + 4 tokens). Both passes are voided, the
    # second's void arriving after rank 0 admitted the rid again: that void names the old
    # admission (batch.incarnation), and re-queuing the rid for it would pull the new one
    # out of the batch it was placed in
    s, pol, first, second = _prefill_ahead()
    assert [r.rid for r in s.void(first)] == [0]  # the first void: re-queued once
    again = pol.form(0, 2)  # admitted again (its launched first chunk reused from the tree)
    assert again.rids == [0]
    assert again.incarnation[0] != second.incarnation[0]
    assert s.void(second) == []  # stale: the rid is the new admission's now
    assert list(s.waiting) == [] and s.reqs[0].row >= 0
    assert s.cache.ledger()["num_violations"] == 0


def test_a_void_rolls_back_the_chunk_placed_ahead_so_the_tree_gets_only_what_ran():
    # chunked prefill runs ahead of outputs: the second chunk is placed (slots extended into
    # the request) before the first pass's void comes back. Only the first chunk ran here;
    # the second must leave the request before it goes back to the queue, or its never
    # computed slots reach the tree as if they held KV
    s, _, first, second = _prefill_ahead()
    assert s.reqs[0].computed == 16  # both chunks extended into the request
    assert [r.rid for r in s.void(first)] == [0]
    assert s.cache.tree.match(list(range(1, 21)))[0] == s.cache.tree.all_slots()
    assert len(s.cache.tree.all_slots()) == 8  # the launched chunk only
    assert s.cache.ledger()["num_violations"] == 0 and s.cache.reserved == 0
    assert second.rolled == {0}
