"""The upstream rule: a rank forms a prefill batch from its own queue and radix tree.

rank_local runs it on every rank; a decision design runs it on rank 0 (and the TP phase on
rank 0 in every design), with the design's `Offer`: what the rank holds of a request, and
how much of that the guard lets it offer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.core import Entry, Req, SlotBatch

if TYPE_CHECKING:
    from ppx.engine.context import RankContext
    from ppx.protocol.continuations import SecondContinuation


class Offer:
    """What rank 0 offers of a request: its own radix match, unclamped (rank_local)."""

    def __init__(self, ctx: RankContext) -> None:
        self.ctx = ctx

    def match(self, req: Req) -> int:
        """This rank's own radix match; -1 while the host tier is loading the rest back."""
        return self.ctx.sched.cache.match(req.tokens)

    def clamp(self, req: Req, local: int) -> int | None:
        """The guard's say: offer less than the local match, or None to defer a round."""
        return local


class LocalPrefill:
    def __init__(self, ctx: RankContext, offer: Offer, second: SecondContinuation) -> None:
        self.ctx, self.offer = ctx, offer
        self.second = second  # the sgl-project#959 guard (engine.admission.second_continuation)

    def form(self, slot: int, pass_id: int) -> SlotBatch | None:
        """The prefill batch of `slot` from this rank's queue and tree; the slot's decode
        batch when there is nothing to prefill."""
        s = self.ctx.sched
        if s.paused:
            return None
        s.at_slot(slot)
        self.second.resume_resident(s)
        entries: list[Entry] = []
        budget = s.chunk_size
        for req in s.candidates():
            if budget <= 0 or len(entries) >= s.max_batch:
                break
            if req is s.cont():
                prefix: int | None = req.computed
            else:
                local = self.offer.match(req)
                if local < 0:
                    continue  # its prefix is being loaded back on this rank: admit it when here
                prefix = self.offer.clamp(req, local)
            if prefix is None:
                continue  # the guard defers this request for a round
            mints = req is not s.cont() and req.seq_len - prefix > budget
            if mints and not self.second.may_mint(s, {x.rid for x in entries}):
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
