"""The small interface every admission policy implements."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.core import Entry, Req, SlotBatch

if TYPE_CHECKING:
    from ppx.engine.context import RankContext
    from ppx.engine.scheduler import Scheduler
    from ppx.protocol.continuations import SecondContinuation


class Policy:
    name = "base"
    # the sgl-project#959 guard (engine.admission.second_continuation), set by make_policy
    second: SecondContinuation | None = None

    def __init__(self, ctx: RankContext) -> None:
        self.ctx = ctx

    @property
    def sched(self) -> Scheduler:
        """The current plan's scheduler (a flip's cutover installs a new one)."""
        return self.ctx.sched

    def schedule(self, p) -> None:
        """Form (or prepare) the batch of pass `p`; sets `p.batch` when it is known."""
        raise NotImplementedError

    def send_decision(self, p) -> None:
        """Put the decision of pass `p` on the wire (rank 0 sends, followers forward)."""

    def recv_decision(self, p) -> None:
        """Receive the decision of pass `p` (followers)."""

    def local_prefill(self, slot: int, pass_id: int) -> SlotBatch | None:
        """The upstream rule: form the prefill batch from this rank's own queue and tree;
        fall back to the slot's decode batch."""
        s = self.sched
        if s.paused:
            return None
        s.at_slot(slot)
        if self.second is not None:
            self.second.resume_resident(s)
        entries: list[Entry] = []
        budget = s.chunk_size
        for req in s.candidates():
            if budget <= 0 or len(entries) >= s.max_batch:
                break
            if req is s.cont():
                prefix = req.computed
            else:
                local = self.local_match(req)
                if local < 0:
                    continue  # its prefix is being loaded back on this rank: admit it when here
                prefix = self.clamp(req, local)
            if prefix is None:
                continue  # the guard defers this request for a round
            mints = req is not s.cont() and req.seq_len - prefix > budget
            if mints and self.second and not self.second.may_mint(s, {x.rid for x in entries}):
                break  # sgl-project#959: the fresh admission that would mint waits a pass
            e = s.admit_entry(req, prefix, budget)
            if e is None:
                break
            entries.append(e)
            budget -= e.extend_len
            if not e.final:
                break  # one chunked request per rank, and it ends the batch
        if entries:
            return s.place(entries, slot, pass_id, "prefill")
        return s.place(s.decode_entries(slot), slot, pass_id, "decode")

    def local_match(self, req) -> int:
        """This rank's own radix match; -1 while the host tier is loading the rest back."""
        return self.sched.cache.match(req.tokens)

    def clamp(self, req, local: int) -> int | None:
        """Hook for the guard: rank 0 may offer less than its local match."""
        return local

    def absorb_tp_void(self, obs: list[list[int]], pass_id: int) -> None:
        """A TP-phase pass was voided; obs rows are [rid, told, local]."""

    def check_told_row(self, rid: int, local: int, told: int) -> None:
        """A follower admits `rid` with `told` from this pass; a told row stamped by an earlier
        pass may apply too (engine.admission.told_scope)."""

    def readmit_told_row(self, req: Req) -> None:
        """A cutover re-admits resident `req` into the new layout; a told row stamped on it
        may apply (engine.admission.told_scope, flip.epoch_advance)."""

    def floor_query(self, pass_id: int) -> int:
        """Rank 0, a TP pass: the rid whose group prefetch completion it asks about (-1: none)."""
        return -1

    def floor_rows(self, rid: int):
        """A TP pass: this rank's row of the all-reduced completion tensor for `rid`."""
        raise NotImplementedError

    def floor_absorb(self, rid: int, rows) -> None:
        """Rank 0: the all-reduced completion rows for `rid`."""

    def at_cutover(self) -> None:
        """A cutover released this layout's KV: forget what belongs to it."""

    def on_served(self, rid: int) -> None:
        """A request finished cleanly (the guard clears its floor)."""

    def lap(self, p, block: bool) -> None:
        """The return path from followers to rank 0; rank_local has none."""

    def absorb(self, slot: int, batch: SlotBatch, msg, p) -> bool:
        """Rank 0 / followers see the output of `batch`; return True when it was a void
        that the policy absorbed (requests re-queued), False for a normal output."""
        return False

    def count_retraction(self, n: int) -> None:
        """A TP-phase follower could not execute rank 0's schedule (any policy: the TP phase
        always executes it)."""

    def counters(self) -> dict[str, int]:
        return {}
