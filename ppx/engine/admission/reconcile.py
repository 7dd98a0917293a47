"""How a follower answers "how much of this rid have I computed?", and what a void does with
the requests it held (sgl-project#798, #797/#797b `pp_void_keeps_request`, #797c).

Two switches, each a design the reference log ran:

- `engine.admission.reconcile`: `slot` (default) answers from the chunked request of the
  slot whose decision is being reconciled; `scheduler` answers from ONE scheduler-wide
  chunked pointer, then the waiting queue's radix match, and a rid found in neither is a
  miss (-1, or 0 under `engine.guard.miss=zero`, which is what the log's reconcile wrote
  before sgl-project#944). With one slot in flight the two are the same pointer.
- `engine.admission.void`: `requeue` (default) puts every member of a voided pass back in
  the waiting queue on every rank (its computed KV stays in the tree); `keep` is the log's
  `pp_void_keeps_request` era: a member that was mid-prefill before the pass (the slot's
  chunked request) stays where it is, parked back to where the pass found it, and the void
  restores the scheduler-wide pointer from the slot's snapshot (`chunked_before`).

- `engine.admission.local_extent`: what a follower reads as its own extent of a request it
  holds mid-prefill, the number a continuation's told is compared with. `planned` (default)
  is everything this rank has placed, the same pipeline position as rank 0's plan;
  `completed` is the rear-most extent whose chunk results this rank has applied -- the log's
  stagger (the #1071 strand, measured on boot_855_1071cut: `told=8192 local=4096` on the
  first chunked prefill of an empty store, told being chunk 3's start and local chunk 1's
  end). Chunked prefill runs ahead of outputs, so with a chunk in flight in another slot the
  two operands sit at different positions and a healthy continuation reads as a shortfall.

Together (`scheduler` + `keep`, two or more slots in flight): the void of one slot restores
that slot's snapshot while another slot's decision is being reconciled, the kept request is
in neither place the lookup reads, the miss is read as a measurement, the pass is retracted
and voided, and its void restores the other slot's snapshot. boot_798 never served a
request: 2212 consecutive `told=98304 local=0` for one rid, voids alternating slots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ppx.core import Entry, Req, SlotBatch
    from ppx.engine.scheduler import Scheduler

RECONCILE = ("slot", "scheduler")
VOIDS = ("requeue", "keep")
EXTENTS = ("planned", "completed")


class Reconciler:
    def __init__(
        self, reconcile: str = "slot", void: str = "requeue", local_extent: str = "planned"
    ) -> None:
        self.slot_blind = reconcile == "scheduler"
        self.keep = void == "keep"
        self.completed = local_extent == "completed"
        self.misses = self.kept = self.slot_answers = self.staggered = 0

    def snapshot(self, s: Scheduler, slot: int) -> None:
        """At the top of a pass: what the slot's chunked pointer was before this pass placed
        anything (the log's `_pp_chunked_req_before_by_slot[mb_id]`)."""
        s.chunked_before[slot] = s.chunked

    def held_chunked(self, s: Scheduler, req: Req, slot: int) -> bool:
        """Does this rank hold `req` mid-prefill, as the configured lookup sees it?"""
        if req is s.chunked:
            return True
        # #798's fix: the slot in flight answers for its own request, whatever another slot's
        # void restored into the scheduler-wide pointer since: a request this rank holds
        # mid-prefill (a row, not queued, not yet pinned to a slot) is held
        return (
            not self.slot_blind
            and self.keep
            and req.row >= 0
            and req.slot < 0
            and req not in s.waiting
            and req.computed < req.seq_len
        )

    def held_extent(self, s: Scheduler, req: Req) -> int:
        """This rank's extent of a request it holds mid-prefill, at the configured position."""
        if not self.completed:
            return req.computed
        # chunks placed in other slots whose results have not come back yet (the slot being
        # reconciled is empty: its previous batch's output was applied before it was reused)
        ahead = sum(
            e.extend_len
            for b in s.inflight
            if b is not None
            and b.placed
            and not b.voided
            and b.incarnation.get(req.rid) == req.admit_seq
            and req.rid not in b.rolled
            for e in b.entries
            if e.rid == req.rid
        )
        self.staggered += ahead > 0
        return req.computed - ahead

    def repoint(self, s: Scheduler, req: Req) -> None:
        """The slot's own request answered where the scheduler-wide pointer had been restored
        to another slot's snapshot: it is this pass's chunked request again."""
        self.slot_answers += 1
        s.chunked = req

    def missed(self, s: Scheduler, req: Req, e: Entry, slot: int) -> bool:
        """The slot-blind lookup found `req` nowhere it reads: not the scheduler-wide chunked
        pointer, not the waiting queue (a kept request is in neither)."""
        if not self.slot_blind or self.held_chunked(s, req, slot):
            return False
        if e.continues or req not in s.waiting:
            self.misses += 1
            return True
        return False

    def void(self, s: Scheduler, batch: SlotBatch) -> list[Req]:
        """Undo a voided pass on this rank; returns the requests put back in the queue."""
        if not self.keep:
            return s.void(batch)
        before = s.chunked_before[batch.slot]
        # only a request still resident mid-prefill is the scheduler's (an earlier void may
        # have re-queued it: restoring that one would queue it twice)
        resident = before is not None and before.row >= 0 and before not in s.waiting
        kept = []
        for e in batch.entries:
            req = s.reqs.get(e.rid)
            if resident and req is before and e.continues:
                if batch.incarnation.get(e.rid) == req.admit_seq:
                    # parked back to where the pass found it, on every rank the same number
                    # (#797b `_park_chunked_prefill_chunk`)
                    s.park(req, e.prefix_len)
                    kept.append(e.rid)
        self.kept += len(kept)
        requeued = s.void(batch, keep=set(kept))
        # the per-slot restore: what this slot found, whoever wrote the pointer since
        s.chunked = before if resident else None
        return requeued

    def counters(self) -> dict:
        return {
            "reconcile_misses": self.misses,
            "reconcile_slot_answers": self.slot_answers,
            "void_kept": self.kept,
            "staggered_reads": self.staggered,
        }


def validate(a, pp: int) -> None:
    """Raises ValueError (one line) for a combination that cannot mean anything."""
    reconcile = getattr(a, "reconcile", "slot")
    void = getattr(a, "void", "requeue")
    if reconcile not in RECONCILE:
        raise ValueError(f"engine.admission.reconcile={reconcile!r}: {' | '.join(RECONCILE)}")
    if void not in VOIDS:
        raise ValueError(f"engine.admission.void={void!r}: {' | '.join(VOIDS)}")
    extent = getattr(a, "local_extent", "planned")
    if extent not in EXTENTS:
        raise ValueError(f"engine.admission.local_extent={extent!r}: {' | '.join(EXTENTS)}")
    if extent != "planned":
        if a.name == "rank_local":
            raise ValueError(
                f"engine.admission.local_extent={extent} means nothing: "
                "engine/admission=rank_local has no told to compare it with"
            )
        if pp < 2:
            raise ValueError(
                f"engine.admission.local_extent={extent} needs pp >= 2: with one rank there "
                "is no follower and no chunk in flight ahead of its result"
            )
    if (reconcile, void) == ("slot", "requeue"):
        return
    if a.name in ("rank_local", "row_authority"):
        what = (
            "never voids nor reconciles a decision"
            if a.name == "row_authority"
            else ("has no decision to reconcile and no voids")
        )
        switch = f"reconcile={reconcile}" if reconcile != "slot" else f"void={void}"
        raise ValueError(
            f"engine.admission.{switch} means nothing: engine/admission={a.name} {what}"
        )
    if reconcile == "scheduler" and pp < 2:
        raise ValueError(
            f"engine.admission.reconcile=scheduler needs two or more slots in flight: pp={pp} "
            "runs one slot, where the scheduler-wide pointer IS the slot's (sgl-project#798)"
        )
