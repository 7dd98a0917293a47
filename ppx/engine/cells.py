"""Where a rank keeps its requests mid-prefill: the scheduler-wide chunked pointer and, under
`engine.admission.continuations=per_slot`, one continuation cell per slot.

`chunked` is the log's `self.chunked_req`: ONE field, written by whichever pass placed a
non-final chunk last and by a void's per-slot restore (`_pp_chunked_req_before_by_slot`).
With `one` (default) it is also the continuation: whichever slot schedules next continues it.
With `per_slot` each slot continues its own continuation (`cells[slot]`) only in its own
passes, so S continuations can be resident at once while the pointer names the last writer:
the world of sgl-project#798, where a slot-blind reconcile reads the pointer.
"""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING

from ppx.core import Req, StopRun

if TYPE_CHECKING:
    from collections import deque


class Cells:
    chunked: Req | None
    waiting: deque[Req]
    reqs: dict[int, Req]
    num_slots: int

    def init_cells(self, per_slot: bool) -> None:
        self.chunked = None  # the scheduler-wide pointer
        self.per_slot = per_slot
        self.cells: list[Req | None] = [None] * self.num_slots
        # the slot's continuation as its last pass found it (engine.admission.void=keep)
        self.chunked_before: list[Req | None] = [None] * self.num_slots
        self.slot_now = 0  # the slot of the pass being scheduled

    def cont(self) -> Req | None:
        """The continuation the pass being scheduled continues."""
        return self.cells[self.slot_now] if self.per_slot else self.chunked

    def continuations(self) -> list[Req]:
        """Every continuation a cell or the pointer names, each once."""
        out: list[Req] = []
        for r in [self.chunked, *self.cells]:
            if r is not None and r not in out:
                out.append(r)
        return out

    def at_slot(self, slot: int) -> None:
        """The pass being scheduled works on `slot` (per_slot: its cell is the continuation)."""
        self.slot_now = slot

    def snapshot_chunked(self, slot: int) -> None:
        """At the top of a pass: the continuation before this pass placed anything (the log's
        `_pp_chunked_req_before_by_slot[mb_id]`; per_slot: the slot's own)."""
        self.slot_now = slot
        self.chunked_before[slot] = self.cont()

    def resume_chunked(self, req: Req | None, slot: int | None = None) -> None:
        """Point the scheduler-wide pointer (and per_slot, the slot's cell) at `req`: a void's
        per-slot restore, or the slot's own request answering where the pointer was clobbered."""
        self.chunked = req
        if self.per_slot:
            self.cells[self.slot_now if slot is None else slot] = req

    def seat_carried(self, order: list[Req]) -> None:
        """A cutover carried these continuations un-retracted: the pointer names the first,
        and per_slot, the cells take them in order (a one-slot plan seats one; the others
        stay resident with no cell, the state sgl-project#959's assert found)."""
        self.chunked = order[0]
        if self.per_slot:
            for slot, req in enumerate(order[: self.num_slots]):
                self.cells[slot] = req

    def placed_chunk(self, req: Req, slot: int, final: bool) -> None:
        if final:
            if self.chunked is req:
                self.chunked = None
            if self.per_slot and self.cells[slot] is req:
                self.cells[slot] = None
            return
        self.chunked = req
        if self.per_slot:
            self.cells[slot] = req

    def forget_chunked(self, req: Req) -> None:
        """`req` left mid-prefill (re-queued, dropped): no pointer or cell names it."""
        if self.chunked is req:
            self.chunked = None
        self.cells = [None if r is req else r for r in self.cells]

    def holds_mid_prefill(self, req: Req) -> bool:
        """A request this rank holds mid-prefill outside the pointer: a row, not queued, not
        yet pinned to a slot, prompt not done (a void parked it in place)."""
        return (
            req.row >= 0 and req.slot < 0 and req not in self.waiting and req.computed < req.seq_len
        )

    def strays(self, but: Set[int] = frozenset()) -> list[Req]:
        """Requests resident mid-prefill that no pointer or cell names (a continuation that
        survived a cutover un-retracted into a phase with fewer cells), rids in `but` aside."""
        named = self.continuations()
        return [
            r
            for r in self.reqs.values()
            if r.rid not in but and r not in named and self.holds_mid_prefill(r)
        ]

    def one_at_a_time(self, minted: Req, batch: set[int], before: Req | None) -> None:
        """One slot, one continuation cell: minting a second while one is resident is the
        fork's `assert self.chunked_req is None` (sgl-project#959). With S slots `per_slot`
        holds one per slot and `void=keep` parks outside the pointer (the #798 world, which
        the reconcile designs answer), so only a one-slot plan checks."""
        resident = self.strays(but=batch)
        if before is not None and before.rid not in batch and before.computed < before.seq_len:
            resident.insert(0, before)
        if resident:
            r = resident[0]
            raise StopRun(
                f"#959 second continuation: rid {minted.rid} minted as a continuation while "
                f"rid {r.rid} (computed {r.computed} of {r.seq_len}) is resident mid-prefill "
                "-- the fork's `assert self.chunked_req is None` (_get_new_batch_prefill_raw, "
                "all three ranks, 3 s after PHASE-FLIP DONE pp_to_tp); the resident "
                "continuation is never the one to give way "
                "(engine.admission.second_continuation=refuse)"
            )
