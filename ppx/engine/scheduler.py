"""Waiting queue, slot batches, chunked prefill, continuous-batching decode.

Every rank runs this same scheduler. Requests are pinned to the slot their final prefill
chunk ran in; with S slots a request gets one token per S passes and the ranks overlap by
working on different slots at the same moment.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ppx.core import Entry, ForwardInputs, Req, SlotBatch, StopRun
from ppx.engine.cache.kv import KVCache
from ppx.engine.cells import Cells
from ppx.engine.faults.base import Candidates
from ppx.engine.inputs import forward_inputs
from ppx.engine.moves import Moves


@dataclass
class Tally:
    """Prefill accounting over the run: tokens computed, tokens reused from the tree."""

    prefill: int = 0
    cached: int = 0


class Scheduler(Cells):
    def __init__(
        self,
        cache: KVCache,
        num_slots: int,
        chunk_size: int,
        max_batch: int,
        device: str = "cpu",
        *,
        candidates: Candidates | None = None,
        eos: frozenset[int] = frozenset(),
        per_slot: bool = False,
        moves: Moves | None = None,
    ) -> None:
        self.cache, self.num_slots = cache, num_slots
        self.chunk_size, self.max_batch, self.device = chunk_size, max_batch, device
        self.waiting: deque[Req] = deque()
        self.reqs: dict[int, Req] = {}
        self.running: list[list[Req]] = [[] for _ in range(num_slots)]
        self.inflight: list[SlotBatch | None] = [None] * num_slots
        # the chunked pointer, and per_slot one continuation per slot (ppx/engine/cells.py)
        self.init_cells(per_slot)
        self.locs: dict[int, list[int]] = {}  # pass_id -> out_cache_loc of its batch
        self.tally = Tally()  # the run's prefill accounting (a flip's new plan inherits it)
        self.paused = False  # a flip is draining: nothing new is scheduled
        # the order it scans its queue in (faults.lifo: newest first), FIFO unless a fault
        self.scan = candidates or Candidates()
        self.eos = eos  # a checkpoint's EOS ids: sampling one finishes
        # who hears about every move: what came in and what left, kept apart from the places
        # it is held in between (a request dropped from every place is still in the ledger),
        # the retract chokepoint's listener, PPX_DEBUG's trace (engine/moves.py)
        self.moves = moves or Moves()

    def inherit(self, old: Scheduler) -> None:
        """A flip's new plan takes over every request (residents were re-queued by the
        cutover) and the run's prefill accounting."""
        self.waiting, self.reqs = old.waiting, old.reqs
        self.tally = old.tally

    def pause(self) -> None:
        """A flip was announced: nothing new is scheduled until the cutover."""
        self.paused = True

    # -- queue ----------------------------------------------------------------------------
    def add(self, reqs: list[Req]) -> None:
        for r in reqs:
            if r.rid in self.reqs:
                continue  # a chain hop the row probe read ahead of its pass added it already
            self.reqs[r.rid] = r
            self.waiting.append(r)
            self.moves.took(r.rid, "the queue it entered")

    def drop(self, rid: int) -> None:
        """Rank 0 retracted `rid` (faults.retract.rid): it leaves this rank, wherever it was
        (its computed KV stays in the tree)."""
        req = self.reqs.pop(rid, None)
        if req is None:
            return
        self.moves.left(rid)
        if req.slot >= 0 and req in self.running[req.slot]:
            self.running[req.slot].remove(req)
        if req in self.waiting:
            self.waiting.remove(req)
        self.forget_chunked(req)
        self.cache.release(req)

    @property
    def idle(self) -> bool:
        return (
            not self.waiting
            and not self.continuations()
            and not any(self.running)
            and not any(b is not None for b in self.inflight)
        )

    @property
    def num_inflight(self) -> int:
        return sum(b is not None for b in self.inflight)

    def places(self) -> dict[int, str]:
        """Where this rank holds each request (the conservation check's view,
        engine/conservation.py): the first place found, in the order a request moves."""
        out: dict[int, str] = {}
        for r in self.waiting:
            out.setdefault(r.rid, "the waiting queue")
        for r in self.continuations():
            out.setdefault(r.rid, "a continuation cell")
        for s, slot in enumerate(self.running):
            for r in slot:
                out.setdefault(r.rid, f"slot {s}")
        for b in self.inflight:
            if b is None:
                continue
            for e in b.entries:
                out.setdefault(e.rid, f"the pass in flight on slot {b.slot}")
        for r in self.strays():
            out.setdefault(r.rid, "a resident with no cell")
        return out

    def limbo(self) -> list[int]:
        """Requests that are nowhere (neither waiting, chunked, running nor in a batch in
        flight) or queued twice: a debugging invariant PPX_DEBUG=1 checks after every pass."""
        held = set(self.places())
        queued = [r.rid for r in self.waiting] + [r.rid for r in self.continuations()]
        twice = {rid for rid in queued if queued.count(rid) > 1}
        return sorted((set(self.reqs) - held) | twice)

    # -- forming batches ------------------------------------------------------------------
    def need_of(self, req: Req, prefix_len: int) -> int:
        """Tokens `req` will still allocate if admitted with `prefix_len` cached."""
        return req.seq_len - prefix_len + req.remaining_new

    def pin_cost(self, tokens: list[int], prefix_len: int) -> int:
        """Evictable slots that admitting over `tokens[:prefix_len]` would lock."""
        if prefix_len <= 0:
            return 0
        tree = self.cache.tree
        _, node = tree.match(tokens[:prefix_len])
        cost = 0
        while node is not tree.root:
            cost += len(node.value) if node.lock == 0 else 0
            node = node.up()
        return cost

    def candidates(self) -> list[Req]:
        """Prefill candidates in order: the chunked continuation first, then FIFO."""
        cont = self.cont()
        head = [cont] if cont is not None else []
        return head + self.scan.order(list(self.waiting))

    def admit_entry(self, req: Req, prefix_len: int, budget: int) -> Entry | None:
        """Admit `req` (if new) with `prefix_len` from the tree and take up to `budget` new
        tokens of it. Returns None when the cache cannot hold it."""
        if req is not self.cont():
            if prefix_len >= req.seq_len:
                # a final entry samples its last computed row: with every token reused there
                # is none, and the pass would sample another request's row (KVCache.match
                # leaves one token to compute; a told or a clamp must too)
                raise StopRun(
                    f"admission: rid {req.rid} admitted with prefix_len {prefix_len} of its "
                    f"{req.seq_len} tokens: none left to compute, no row to sample"
                )
            need = self.need_of(req, prefix_len)
            # locking the reused prefix takes its slots out of what eviction could free, so
            # they are part of the cost; counting them as available is how a follower once
            # admitted a told schedule and then raised `KV pool exhausted` in place()
            if not self.cache.can_admit(need + self.pin_cost(req.tokens, prefix_len)):
                return None
            if self.moves.trace is not None:  # PPX_DEBUG=1 only: no string built otherwise
                self.moves.trace(f"admit rid={req.rid} prefix={prefix_len}")
            self.cache.admit(req, prefix_len, self.need_of(req, prefix_len))
            self.tally.cached += prefix_len
            self.moves.admitted.append((req.rid, prefix_len))
            self.waiting.remove(req)
        extend = min(req.seq_len - req.computed, budget)
        final = req.computed + extend == req.seq_len
        return Entry(req.rid, req.computed, extend, final, continues=req is self.cont())

    def place(self, entries: list[Entry], slot: int, pass_id: int, mode: str) -> SlotBatch | None:
        """Allocate KV for the entries, update the chunked pointer, record the batch."""
        if not entries:
            return None
        locs: list[int] = []
        before, minted = self.cont(), None
        with self.cache.batched_rows():
            for e in entries:
                req = self.reqs[e.rid]
                locs += self.cache.extend(req, e.extend_len)
                if mode == "prefill":
                    self.tally.prefill += e.extend_len
                    self.placed_chunk(req, slot, e.final)
                    if e.final:
                        req.slot = slot
                    else:
                        minted = req
        if minted is not None and minted is not before and self.num_slots == 1:
            self.one_at_a_time(minted, {e.rid for e in entries}, before)
        self.locs[pass_id] = locs
        batch = SlotBatch(
            slot,
            pass_id,
            mode,
            entries,
            incarnation={e.rid: self.reqs[e.rid].admit_seq for e in entries},
        )
        self.inflight[slot] = batch
        return batch

    def decode_entries(self, slot: int) -> list[Entry]:
        return [Entry(r.rid, r.seq_len - 1, 1, True) for r in self.running[slot][: self.max_batch]]

    # -- running a batch ------------------------------------------------------------------
    def inputs(self, batch: SlotBatch, first_stage: bool) -> ForwardInputs:
        return forward_inputs(self, batch, first_stage)

    def after_launch(self, batch: SlotBatch) -> None:
        """This rank computed the batch: its chunks' KV is real, so the tree may share it."""
        self.locs.pop(batch.pass_id, None)
        if batch.mode == "prefill":
            for e in batch.entries:
                self.cache.commit(self.reqs[e.rid])

    def apply_output(self, slot: int, tokens: list[int]) -> list[tuple[Req, int]]:
        """Results for the slot's batch came back: append tokens, pin, finish."""
        batch = self.inflight[slot]
        assert batch is not None, f"output for slot {slot}, which has no batch in flight"
        self.inflight[slot] = None
        finals = [e for e in batch.entries if e.final]
        assert len(finals) == len(tokens), f"output width {len(tokens)} != {len(finals)}"
        out = []
        for e, tok in zip(finals, tokens):
            req = self.reqs[e.rid]
            req.output.append(int(tok))
            if int(tok) in self.eos:  # every rank applies the same tokens, so all agree
                req.max_new = req.output_len
            out.append((req, int(tok)))
            if batch.mode == "prefill" and not req.finished:
                self.running[slot].append(req)
            if req.finished:
                self.finish(req)
        if out:
            self.moves.committed()
        return out

    def finish(self, req: Req) -> None:
        if req in self.running[req.slot]:
            self.running[req.slot].remove(req)
        self.cache.release(req)
        del self.reqs[req.rid]
        self.moves.left(req.rid)

    def holds_running(self, req: Req) -> bool:
        """A request this rank holds in a slot's running batch (its final chunk ran here)."""
        return 0 <= req.slot < self.num_slots and req in self.running[req.slot]

    def keep_running(self, req: Req) -> None:
        """A voided pass whose final chunk of `req` this rank ran: the request stays pinned to
        its slot as a resident (engine.admission.void=keep_running), as it would be had the
        pass been served, with no token sampled."""
        if req not in self.running[req.slot]:
            self.running[req.slot].append(req)

    def placed_ahead(self, req: Req) -> int:
        """Tokens of `req` placed in slots whose results have not come back yet."""
        return sum(
            e.extend_len
            for b in self.inflight
            if b is not None
            and b.placed
            and not b.voided
            and b.incarnation.get(req.rid) == req.admit_seq
            and req.rid not in b.rolled
            for e in b.entries
            if e.rid == req.rid
        )

    def hold_void(self, batch: SlotBatch) -> None:
        """A pass this rank retracted: it holds the slot, placed nowhere, until its void
        comes back on the ring."""
        self.inflight[batch.slot] = batch

    def void(self, batch: SlotBatch, keep: frozenset[int] | set[int] = frozenset()) -> list[Req]:
        """The pass ran nowhere: undo what this rank allocated but never computed and re-queue
        the pass's requests at the front (generated tokens kept, computed KV kept in the tree),
        each exactly once. A request re-admitted since (a newer admit_seq) is left alone, and
        so is one in `keep` (parked in place, engine.admission.void=keep)."""
        requeued = []
        for e in reversed(batch.entries):
            req = self.reqs.get(e.rid)
            if req is None or batch.incarnation.get(e.rid) != req.admit_seq or e.rid in keep:
                continue
            if req.row >= 0:
                self._rollback_unlaunched(req)
            if not e.continues and e.prefix_len == req.cached:
                # the admission ran nowhere: its reuse was offered, never kept
                self.tally.cached -= req.cached
            self.requeue(req)
            requeued.append(req)
        if self.inflight[batch.slot] is batch:
            self.inflight[batch.slot] = None
        self.locs.pop(batch.pass_id, None)
        return requeued

    def _rollback_unlaunched(self, req: Req) -> None:
        """Later chunks of `req` may already be placed in other slots (chunked prefill runs
        ahead of outputs); what this rank has not computed must not reach the tree."""
        batches = [b for b in self.inflight if b is not None and b.placed and not b.launched]
        for b in sorted(batches, key=lambda b: -b.pass_id):
            if b.incarnation.get(req.rid) == req.admit_seq and req.rid not in b.rolled:
                e = next(x for x in b.entries if x.rid == req.rid)
                self.cache.rollback(req, e.extend_len)
                if b.mode == "prefill":
                    self.tally.prefill -= e.extend_len
                b.rolled.add(req.rid)

    def park(self, req: Req, upto: int) -> None:
        """Put a mid-prefill request back to `upto` computed tokens on this rank, in place:
        chunks placed but not computed are rolled back, computed ones leave the request (the
        tree keeps their KV), so every rank stands at the same number."""
        self._rollback_unlaunched(req)
        if req.computed > upto:
            self.cache.truncate(req, upto)
        req.slot = -1

    def requeue(self, req: Req) -> None:
        if self.moves.trace is not None:
            self.moves.trace(
                f"requeue rid={req.rid} row={req.row} slot={req.slot} computed={req.computed}"
            )
        self.moves.requeued(req.rid)
        if req.slot >= 0 and req in self.running[req.slot]:
            self.running[req.slot].remove(req)
        self.forget_chunked(req)
        self.cache.release(req)
        req.slot, req.computed = -1, 0
        if req not in self.waiting:
            self.waiting.appendleft(req)
