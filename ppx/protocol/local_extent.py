"""`engine.admission.local_extent`: what a follower reads as its own extent of a request it
holds mid-prefill, the number a continuation's told is compared with (the #1071 strand).

- `planned` (default): everything this rank has placed, the same pipeline position as rank
  0's plan.
- `completed`: the rear-most extent whose chunk results this rank has applied -- the log's
  stagger (boot_855_1071cut: `told=8192 local=4096` on the first chunked prefill of an empty
  store, told being chunk 3's start and local chunk 1's end). Chunked prefill runs ahead of
  outputs, so with a chunk in flight in another slot the two operands sit at different
  positions and a healthy continuation reads as a shortfall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.protocol.views import SchedulerView

AXIS = Axis(
    "engine.admission.local_extent",
    "local_extent",
    "a follower's own extent of a request it holds mid-prefill",
    default="planned",
    counters=(Counter("staggered_reads"),),  # a held extent read with a chunk still ahead
)


class LocalExtent(Variant):
    axis = AXIS

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.staggered = 0

    def held_extent(self, sched: SchedulerView, req: Req) -> int:
        return req.computed

    def counters(self) -> dict[str, int]:
        return {"staggered_reads": self.staggered}


class Planned(LocalExtent):
    name = "planned"
    ref = "the entry after sgl-project#1071 (log line 89)"
    about = "what this rank placed: the plan's own position"


class Completed(LocalExtent):
    name = "completed"
    ref = "sgl-project#1071 (boot_855_1071cut)"
    about = "the chunks whose results came back: one chunk behind the plan"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if not policy_of(cfg).decides:
            return (
                f"{cls.switch()} means nothing: engine/admission=rank_local has no told to "
                "compare it with"
            )
        if int(cfg.pp) < 2:
            return (
                f"{cls.switch()} needs pp >= 2: with one rank there is no follower and no "
                "chunk in flight ahead of its result"
            )
        return None

    def held_extent(self, sched: SchedulerView, req: Req) -> int:
        # chunks placed in other slots whose results have not come back yet (the slot being
        # reconciled is empty: its previous batch's output was applied before it was reused)
        ahead = sched.placed_ahead(req)
        self.staggered += ahead > 0
        return req.computed - ahead
