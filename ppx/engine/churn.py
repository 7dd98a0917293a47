"""Flip churn: the livelock bound on semantic progress across cutovers (issue 26).

The void bound (`engine.liveness.livelock_passes`) counts voided passes; a run whose flips re-queue the
same residents forever voids nothing and would only end at `watch.max_run_s` as a `timeout`.
Rank 0 counts, since the last token it committed, the cutovers that found work and the
re-admissions of the residents they re-queued; `engine.liveness.livelock_flips` or
`engine.liveness.livelock_readmits` of them (0 = no bound) end the run `livelocked`, naming the churn:
how many flips and re-admissions, since which pass, and which rids repeated with how far their
prefill had got. Only rank 0 counts and decides (its committed tokens are the run's), like the
void bound; ranks that left nothing behind (an idle engine flipping) count nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ppx.engine.board import F

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.engine.context import RankContext


@dataclass
class Retracted:
    """A resident a cutover re-queued: its admission then, and how far it had got."""

    admit_seq: int
    computed: int
    seq_len: int


class Churn:
    def __init__(self, ctx: RankContext, due: str, max_flips: int, max_readmits: int) -> None:
        self.ctx, self.due = ctx, due  # the flip.due design, named in the reason
        # engine.liveness.livelock_flips / engine.liveness.livelock_readmits (0 = no bound)
        self.max_flips, self.max_readmits = max_flips, max_readmits
        self.readmits = 0  # the run's total (the summary's `readmits`)
        self.pending: dict[int, Retracted] = {}  # rid -> its retraction, until re-admitted
        self.reset(pass_id=0)

    def reset(self, pass_id: int) -> None:
        """A new streak (a token was committed, or the engine is idle)."""
        self.tokens = self.ctx.board.f[F.TOKENS]
        self.since = pass_id
        self.flips = self.streak_readmits = 0
        self.repeats: dict[int, int] = {}  # rid -> re-admissions in this streak
        self.last: dict[int, Retracted] = {}  # rid -> the retraction it was re-admitted from

    def cutover(self, pass_id: int, residents: list[Req]) -> None:
        """Rank 0, at a cutover: a flip that found work counts toward the streak."""
        if not self.ctx.is_first:
            return
        self.progress(pass_id)
        if self.ctx.sched.idle and not residents:
            self.reset(pass_id)  # nothing waits on the engine: an idle flip is no churn
            return
        self.flips += 1
        for req in residents:
            self.pending[req.rid] = Retracted(req.admit_seq, req.computed, req.seq_len)

    def check(self, pass_id: int) -> None:
        """Rank 0, every pass: count the re-admissions since, and stop at a bound."""
        self.progress(pass_id)
        reqs = self.ctx.sched.reqs
        for rid in list(self.pending):
            req = reqs.get(rid)
            if req is None:
                del self.pending[rid]
            elif req.admit_seq > self.pending[rid].admit_seq:  # admitted again since
                self.last[rid] = self.pending.pop(rid)
                self.readmits += 1
                self.streak_readmits += 1
                self.repeats[rid] = self.repeats.get(rid, 0) + 1
        over_flips = 0 < self.max_flips <= self.flips
        over_readmits = 0 < self.max_readmits <= self.streak_readmits
        if over_flips or over_readmits:
            self.ctx.stop(self.reason(over_flips))

    def progress(self, pass_id: int) -> None:
        """A token committed by rank 0 since the last look ends the streak."""
        if self.ctx.board.f[F.TOKENS] != self.tokens:
            self.reset(pass_id)

    def reason(self, over_flips: bool) -> str:
        bound = (
            f"engine.liveness.livelock_flips={self.max_flips}"
            if over_flips
            else f"engine.liveness.livelock_readmits={self.max_readmits}"
        )
        rows = sorted(self.repeats.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
        repeating = [
            (rid, n, f"{self.last[rid].computed}/{self.last[rid].seq_len}") for rid, n in rows
        ]
        head = [r.rid for r in list(self.ctx.sched.waiting)[:4]]
        return (
            f"livelock: {self.flips} flips and {self.streak_readmits} re-admissions with no "
            f"token committed since pass {self.since} ({bound}, flip.due={self.due}); "
            f"(rid, re-admissions, computed/len at its last cutover) repeating: {repeating}; "
            f"queue head {head}"
        )
