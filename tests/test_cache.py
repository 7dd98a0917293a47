"""Radix tree and KV cache: match / insert / lock / LRU eviction, and the ledger."""

from __future__ import annotations

from ppx.core import Req
from ppx.engine.cache.kv import KVCache
from ppx.engine.cache.radix import RadixTree


def test_radix_match_insert_split():
    t = RadixTree()
    assert t.insert([1, 2, 3, 4], [10, 11, 12, 13]) == 0
    assert t.insert([1, 2, 9], [10, 11, 20]) == 2  # the first two were present
    slots, node = t.match([1, 2, 3, 7])
    assert slots == [10, 11, 12]
    assert t.match([1, 2])[0] == [10, 11]  # ends inside a node: split, exact node returned
    assert t.size == 5


def test_radix_lock_protects_and_lru_evicts_leaves_first():
    t = RadixTree()
    t.insert([1, 2, 3], [0, 1, 2])
    t.insert([5, 6], [3, 4])
    t.match([5, 6])  # touch: [1,2,3] is now least recently used
    _, node = t.match([5, 6])
    t.lock(node)
    assert t.evictable == 3
    freed = t.evict(1)
    assert sorted(freed) == [0, 1, 2]
    assert t.evict(10) == []  # the locked path survives
    t.unlock(node)
    assert sorted(t.evict(10)) == [3, 4]


def _cache(pool=64):
    return KVCache(
        num_layers=1, pool_tokens=pool, kv_heads=1, head_dim=2, max_reqs=4, max_context=64
    )


def test_kv_lifecycle_keeps_ledger_and_reuses_prefix():
    c = _cache()
    a = Req(0, [1, 2, 3, 4, 5], max_new=2)
    c.admit(a, 0, need=a.seq_len + a.remaining_new)
    c.extend(a, 5)
    c.commit(a)
    assert c.ledger()["num_violations"] == 0
    a.output += [7]
    c.extend(a, 1)
    a.output += [8]
    c.release(a)
    led = c.ledger()
    assert led["num_violations"] == 0 and led["request"] == 0 and led["tree"] == 6
    b = Req(1, [1, 2, 3, 4, 5, 7, 9], max_new=1)
    assert c.match(b.tokens) == 6  # shares prompt + generated token
    assert c.match([1, 2, 3, 4, 5]) == 4  # always leaves one token to compute


def test_kv_eviction_under_pressure_keeps_ledger():
    c = _cache(pool=16)
    for i in range(6):
        r = Req(i, [100 + i] * 5, max_new=1)
        assert c.can_admit(r.seq_len + 1)
        c.admit(r, 0, need=r.seq_len + 1)
        c.extend(r, 5)
        c.commit(r)
        r.output.append(1)
        c.release(r)
        assert c.ledger()["num_violations"] == 0
    assert c.evictions > 0


def test_kv_ledger_detects_a_double_owned_slot():
    c = _cache()
    r = Req(0, [1, 2, 3], max_new=1)
    c.admit(r, 0, need=4)
    c.extend(r, 3)
    c.free.append(c.rows[0][0])  # corrupt: a request-owned slot also on the free list
    assert c.ledger()["num_violations"] >= 1


def test_rollback_undoes_an_extend():
    c = _cache()
    r = Req(0, [1, 2, 3, 4], max_new=1)
    c.admit(r, 0, need=5)
    c.extend(r, 4)
    c.rollback(r, 4)
    assert r.computed == 0 and c.ledger()["num_violations"] == 0
    c.release(r)
    assert c.reserved == 0 and len(c.free) == 64


def test_a_split_keeps_the_lock_of_the_node_it_splits():
    # a request holds [1, 2, 3, 4]; a sibling that shares [1, 2] splits that node, and the
    # new parent [1, 2] is part of the held path: eviction must not take it
    t = RadixTree()
    t.insert([1, 2, 3, 4], [0, 1, 2, 3])
    _, held = t.match([1, 2, 3, 4])
    t.lock(held)
    t.insert([1, 2, 9], [0, 1, 4])  # splits [1, 2, 3, 4] at 2
    assert t.evictable == 1  # the sibling's own token only
    assert t.evict(10) == [4]
    assert t.match([1, 2, 3, 4])[0] == [0, 1, 2, 3]  # the held prefix is whole
    t.unlock(held)  # and its lock count comes back to zero on every node of the path
    assert sorted(t.evict(10)) == [0, 1, 2, 3]


def test_a_commit_frees_its_duplicates_of_what_the_tree_holds():
    # two requests compute the same prompt in the same passes (neither saw the other's KV
    # at admission): the second commit finds the tokens present, points its row at the
    # tree's slots and frees its own copies; the pool partition stays whole
    c = _cache(pool=16)
    a, b = Req(0, [1, 2, 3, 4], max_new=1), Req(1, [1, 2, 3, 4], max_new=1)
    for r in (a, b):
        c.admit(r, 0, need=5)
        c.extend(r, 4)
    c.commit(a)
    c.commit(b)
    led = c.ledger()
    assert led["num_violations"] == 0 and led["tree"] == 4
    assert c.rows[1][:4] == c.rows[0][:4]  # b reads a's copies now
    assert len(c.free) == 16 - 4
    for r in (a, b):
        c.release(r)
    assert c.reserved == 0 and c.ledger()["num_violations"] == 0


def test_rank0_admits_against_the_smallest_pool_through_its_slack():
    # a decision travels to every rank (#1045): rank 0's 64-slot pool beside a follower's 40
    # gives a slack of 24 (plan.py), and nothing above 40 may be admitted
    c = _cache(pool=64)
    assert c.can_admit(41)  # red: its own pool alone would take it
    c.slack = 64 - 40
    assert c.available == 40 and c.can_admit(40) and not c.can_admit(41)
    r = Req(0, [1] * 30, max_new=2)
    c.admit(r, 0, need=32)
    assert c.available == 8 and not c.can_admit(9)
