"""The seams between the pass and an admission design.

The pass holds each seam directly, never a callback threaded through a constructor:

- `Admission` (loop.py's schedule and decision steps): form this pass's batch and agree on it
  across ranks;
- `ReturnPath` (the output ring, the laps, the TP phase's voids): what comes back to rank 0;
- `CutoverSeam` (ppx/engine/admission/cutover.py, held by flip.py): what a cutover releases
  and re-admits;
- `TPFloor` (ppx/engine/admission/tp_floor.py, held by tp_phase.py): the #1175 floor asked in
  the TP phase's header.

Each is small on purpose: a design that needs a new question of the pass gets a new seam,
not a seventh hook on an old one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ppx.core import Message, SlotBatch
    from ppx.engine.admission.prefill import LocalPrefill
    from ppx.engine.context import RankContext
    from ppx.engine.loop import PassState


class Admission:
    """Form the batch of a pass (and put the decision on the wire, or take it off)."""

    name = "base"

    def __init__(self, ctx: RankContext, prefill: LocalPrefill) -> None:
        self.ctx, self.prefill = ctx, prefill

    def schedule(self, p: PassState) -> None:
        """Form (or prepare) the batch of pass `p`; sets `p.batch` when it is known."""
        raise NotImplementedError

    def send_decision(self, p: PassState) -> None:
        """Put the decision of pass `p` on the wire (rank 0 sends, followers forward)."""

    def recv_decision(self, p: PassState) -> None:
        """Receive the decision of pass `p` (followers)."""

    def on_served(self, rid: int) -> None:
        """A request finished cleanly (the guard clears its floor)."""

    def counters(self) -> dict[str, int]:
        return {}


class ReturnPath:
    """What comes back to rank 0: the laps, and the voids the output ring (or the TP phase's
    all-reduce) brings. rank_local has none: every hook is inert."""

    def lap(self, p: PassState, block: bool) -> None:
        """The return path from followers to rank 0."""

    def absorb(self, slot: int, batch: SlotBatch, msg: Message, p: PassState | None) -> bool:
        """The output of `batch` arrived; True when it was a void this path absorbed (its
        requests re-queued), False for a normal output."""
        return False

    def absorb_tp_void(self, obs: list[list[int]], pass_id: int) -> None:
        """A TP-phase pass was voided; obs rows are [rid, told, local]."""

    def count_retraction(self, n: int) -> None:
        """A TP-phase follower could not execute rank 0's schedule (any policy: the TP phase
        always executes it)."""
