"""Per-rank KV cache: pool buffers for this rank's layers, req_to_token, free list, tree.

Ownership (the ledger): every pool slot is exactly one of free, tree-owned (stored in the
radix tree) or request-owned (row[tree_len:computed] of a live request). Admission reserves
the tokens a request will still allocate, so a decode step never runs out mid-batch.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from ppx.core import Req
from ppx.engine.cache.radix import Node, RadixTree
from ppx.engine.faults.base import Readiness
from ppx.engine.int_tensor import int_tensor

if TYPE_CHECKING:
    from ppx.engine.cache.host import HostTier


def _locked_node(req: Req) -> Node:
    """The radix node `req` locks: admit sets it, and every commit moves it, for as long as the
    request holds a row (ppx/core keeps it untyped: the core does not import the engine)."""
    assert isinstance(req.node, Node), f"rid {req.rid} holds a row but no radix node"
    return req.node


class KVCache:
    def __init__(
        self,
        num_layers: int,
        pool_tokens: int,
        kv_heads: int,
        head_dim: int,
        max_reqs: int,
        max_context: int,
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.pool_tokens = pool_tokens
        shape = (pool_tokens, kv_heads, head_dim)
        # plain tensors even when built under inference mode (the simulator runs in it): an
        # inference tensor keeps no version counter, and the hash model's mirror of its pool
        # trusts only that counter to know nobody else wrote it (model/hash_mirror.py)
        with torch.inference_mode(False):
            self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
            self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.req_to_token = torch.zeros((max_reqs, max_context), dtype=torch.int32, device=device)
        self._empty()

    def reset(self) -> None:
        """Back to a freshly built cache, in place (the simulator's explorer reuses one per
        rank and phase across its schedules instead of allocating the pools again)."""
        for t in (*self.k, *self.v, self.req_to_token):
            t.zero_()
        self._empty()

    def _empty(self) -> None:
        pool_tokens, max_reqs = self.pool_tokens, self.req_to_token.shape[0]
        self.free: list[int] = list(range(pool_tokens - 1, -1, -1))  # pop() takes slot 0 first
        self.free_rows: list[int] = list(range(max_reqs - 1, -1, -1))
        self.tree = RadixTree()
        self.reserved = 0
        self.tree_len: dict[int, int] = {}  # rid -> leading tokens of its row owned by the tree
        self.rows: dict[int, list[int]] = {}  # rid -> slot ids of its row (host mirror)
        self.evictions = 0
        self.slack = 0  # rank 0 under a decision policy admits against the smallest pool
        self.host: HostTier | None = None  # engine.kv.host_tier is on
        self.readiness = Readiness()  # the rank's faults on what its match reports
        self._pending_rows: list | None = None  # req_to_token writes held by `batched_rows`

    # -- capacity -------------------------------------------------------------------------
    @property
    def available(self) -> int:
        return len(self.free) + self.tree.evictable - self.reserved - self.slack

    def can_admit(self, need: int) -> bool:
        if self.available < need and self.host is not None and self.host.loading:
            # a load that has landed joins the tree first (its slots become evictable): one
            # that landed this very instant (a 0 ms host link) can no longer be cancelled and
            # is not in the tree yet, so its slots counted nowhere and a follower told 0
            # could not hold what rank 0 admitted against the same pool (found by the
            # scenario explorer; tests/test_host_tier.py)
            self.land_prefetches()
        if self.available < need and self.host is not None and self.host.loading:
            self.free += self.host.cancel_all()  # speculative loads yield to admissions
        return bool(self.free_rows) and self.available >= need

    def _alloc(self, n: int) -> list[int]:
        if len(self.free) < n:
            freed = self.tree.evict(n - len(self.free), self.host.save if self.host else None)
            self.evictions += len(freed)
            self.free += freed
        if len(self.free) < n:
            raise RuntimeError(f"KV pool exhausted: need {n}, free {len(self.free)}")
        return [self.free.pop() for _ in range(n)]

    def _alloc_spare(self, n: int) -> list[int] | None:
        """Slots for a host load-back: free ones only, and only out of room no admission has
        reserved. It never evicts: a match must not take away a prefix another entry of the
        same decision was just measured against."""
        if len(self.free) - max(self.reserved + self.slack - self.tree.evictable, 0) < n:
            return None
        return [self.free.pop() for _ in range(n)]

    # -- request lifecycle ----------------------------------------------------------------
    def match(self, tokens: list[int], may_load: bool = True) -> int:
        """Local prefix length for a sequence, leaving one token to compute. With a host
        tier: -1 (unresolved) while the continuation is being loaded back, and a load is
        started when the host holds it; -1 too, starting nothing, when the host holds it but
        the caller may not load it yet (engine.kv.load_back=admitted: no extent)."""
        self.land_prefetches()
        usable = tokens[: max(len(tokens) - 1, 0)]
        slots, _ = self.tree.match(usable)
        if self.host is not None and len(slots) < len(usable):
            if self.host.pending_for(usable, len(slots)):
                return -1
            if not may_load and self.host.holds(usable, len(slots)):
                return -1
            if self.host.start_load(usable, len(slots), self._alloc_spare):
                return -1
        return self._capped(len(slots))

    def tree_match(self, tokens: list[int]) -> int:
        """What this rank can use right now, ignoring loads under way."""
        return self._capped(len(self.tree.match(tokens[: max(len(tokens) - 1, 0)])[0]))

    def _capped(self, n: int) -> int:
        # faults.match_cap.tokens: this rank reports (and so reuses) fewer tokens than it holds
        return self.readiness.match(n)

    def land_prefetches(self) -> None:
        """Insert finished host loads into the tree (main thread only)."""
        if self.host is None:
            return
        for e in self.host.finished():
            prefix, _ = self.tree.match(list(e.path[: e.start]))
            if len(prefix) < e.start:  # the prefix it extends was evicted meanwhile
                self.free += e.slots
                continue
            present = self.tree.insert(list(e.path), prefix + e.slots)
            self.free += [s for i, s in enumerate(e.slots) if e.start + i < present]

    def admit(self, req: Req, prefix_len: int, need: int) -> None:
        """Give `req` a row, its first `prefix_len` tokens from the tree (locked), and reserve
        `need` tokens for what it will still allocate."""
        slots, node = self.tree.match(req.tokens[:prefix_len])
        assert len(slots) == prefix_len, f"rid {req.rid}: tree holds {len(slots)} < {prefix_len}"
        req.row = self.free_rows.pop()
        self.tree.lock(node)
        req.node = node
        self.rows[req.rid] = list(slots)
        self.tree_len[req.rid] = prefix_len
        if prefix_len:
            self.req_to_token[req.row, :prefix_len] = int_tensor(slots, torch.int32)
        req.computed = prefix_len
        req.cached = prefix_len
        req.admit_seq += 1
        req.reserved = need
        self.reserved += need

    def extend(self, req: Req, n: int) -> list[int]:
        """Allocate `n` slots for the next tokens of `req` (a chunk or a decode step)."""
        locs = self._alloc(n)
        row = self.rows[req.rid]
        start = len(row)
        assert start == req.computed, f"rid {req.rid}: row {start} != computed {req.computed}"
        row += locs
        if self._pending_rows is not None:  # inside `batched_rows`: one write at its end
            self._pending_rows.append((req.row, start, locs))
        else:
            self.req_to_token[req.row, start : start + n] = int_tensor(locs, torch.int32)
        req.computed += n
        used = min(n, req.reserved)
        req.reserved -= used
        self.reserved -= used
        return locs

    @contextmanager
    def batched_rows(self):
        """`extend` calls inside write req_to_token once for the whole batch (a tensor and
        an indexed store per request cost ~10 us each, per pass); the write happens on the
        way out even when an extend raised, so what was allocated is always in the rows."""
        self._pending_rows = []
        try:
            yield
        finally:
            pending, self._pending_rows = self._pending_rows, None
            if pending:
                rows = [r for r, _, locs in pending for _ in locs]
                cols = [c for _, start, locs in pending for c in range(start, start + len(locs))]
                flat = [s for _, _, locs in pending for s in locs]
                dev = self.req_to_token.device
                self.req_to_token[int_tensor(rows, device=dev), int_tensor(cols, device=dev)] = (
                    int_tensor(flat, torch.int32, dev)
                )

    def rollback(self, req: Req, n: int) -> None:
        """Undo the last `extend(req, n)` of a pass that never ran (a void)."""
        row = self.rows[req.rid]
        self.free += row[len(row) - n :]
        del row[len(row) - n :]
        req.computed -= n
        req.reserved += n
        self.reserved += n

    def truncate(self, req: Req, upto: int) -> None:
        """A computed chunk leaves the request (engine.admission.void=keep parks it): slots the
        request owns beyond `upto` are freed, tree-owned ones stay in the tree, unlocked."""
        row, tl = self.rows[req.rid], self.tree_len[req.rid]
        n = len(row) - upto
        self.free += row[max(tl, upto) :]
        del row[upto:]
        req.computed = upto
        req.reserved += n
        self.reserved += n
        if tl > upto:
            _, node = self.tree.match(req.tokens[:upto])
            self.tree.lock(node)
            self.tree.unlock(_locked_node(req))
            req.node = node
            self.tree_len[req.rid] = upto

    def commit(self, req: Req) -> None:
        """After this rank computed a chunk: hand the computed prefix to the tree so later
        requests reuse it. Our duplicates of tokens already present are freed and the row
        points at the tree's copies (same tokens, same positions)."""
        row = self.rows[req.rid]
        tokens = req.tokens[: req.computed]
        present = self.tree.insert(tokens, row)
        old = self.tree_len[req.rid]
        if present > old:
            tree_slots, _ = self.tree.match(tokens[:present])
            dup = [s for s, t in zip(row[old:present], tree_slots[old:present]) if s != t]
            self.free += dup
            row[old:present] = tree_slots[old:present]
            self.req_to_token[req.row, old:present] = int_tensor(
                tree_slots[old:present], torch.int32
            )
        _, node = self.tree.match(tokens)
        self.tree.lock(node)
        self.tree.unlock(_locked_node(req))
        req.node = node
        self.tree_len[req.rid] = len(tokens)

    def release(self, req: Req) -> None:
        """The request leaves this rank's cache (finished, retracted or re-queued): its
        computed KV goes to the tree, its reservation and row are returned."""
        if req.row < 0:
            return
        self.commit(req)
        self.tree.unlock(_locked_node(req))
        self.reserved -= req.reserved
        req.reserved, req.node = 0, None
        self.free_rows.append(req.row)
        req.row = -1
        del self.rows[req.rid], self.tree_len[req.rid]

    def drop_unlocked(self) -> None:
        """Evict every cached prefix no request holds (faults.cache_drop.rank: a rank-local loss)."""
        self.free += self.tree.evict(self.tree.evictable)

    # -- ledger ---------------------------------------------------------------------------
    def ledger(self) -> dict:
        """Check the partition free / tree-owned / request-owned; returns counts + violations."""
        free = self.free
        tree = self.tree.all_slots()
        owned = [s for rid, row in self.rows.items() for s in row[self.tree_len[rid] :]]
        seen: dict[int, str] = {}
        violations: list[str] = []
        loading: list[int] = self.host.loading_slots if self.host else []
        for name, slots in (
            ("free", free),
            ("tree", tree),
            ("request", owned),
            ("prefetch", loading),
        ):
            for s in slots:
                if s in seen:
                    violations.append(f"slot {s} both {seen[s]} and {name}")
                seen[s] = name
        missing = self.pool_tokens - len(seen)
        if missing:
            violations.append(f"{missing} slots owned by nobody")
        return {
            "free": len(free),
            "tree": len(tree),
            "request": len(owned),
            "prefetch": len(loading),
            "violations": violations[:20],
            "num_violations": len(violations),
        }
