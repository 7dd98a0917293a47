"""`engine.admission.batch_order`: the order a follower runs rank 0's prefill rows in.

- `decision` (default): rank 0's decision order.
- `queue`: the follower's own waiting queue's order (#791 forwarded slice 1, its stated gap:
  "NOT COVERED BY THIS SLICE: BATCH ORDER"). The same rids and lengths, so the same width:
  only the proxy's fingerprint (or the oracle, behind `engine.width_check=rows`) sees rows
  that belong to other requests. The order differs under `faults.lifo.rank=1`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.core import Entry
from ppx.protocol.axis import Axis, Variant
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.protocol.views import SchedulerView

AXIS = Axis(
    "engine.admission.batch_order",
    "batch_order",
    "the order a follower runs rank 0's prefill rows in",
    default="decision",
)


class BatchOrder(Variant):
    axis = AXIS

    def snapshot(self, sched: SchedulerView) -> dict[int, int]:
        """Taken before this pass's admissions leave the queue: rid -> position."""
        return {}

    def arrange(self, admitted: list[Entry], order: dict[int, int]) -> list[Entry]:
        return admitted


class DecisionOrder(BatchOrder):
    name = "decision"
    ref = "#791"
    about = "rank 0's decision order"


class QueueOrder(BatchOrder):
    name = "queue"
    ref = "#791 forwarded slice 1 (its stated gap)"
    about = "the follower's own waiting-queue order: equal width, permuted rows"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        p = policy_of(cfg)
        if not p.decides or p.never_voids:
            why = (
                "executes rank 0's rows verbatim, order included"
                if p.decides
                else "has no decision to reorder"
            )
            return f"{cls.switch()} means nothing: {p.name} {why}"
        if int(cfg.pp) < 2:
            return (
                f"{cls.switch()} needs pp >= 2: with one rank there is no follower to reorder "
                "rank 0's decision"
            )
        return None

    def snapshot(self, sched: SchedulerView) -> dict[int, int]:
        return {r.rid: i for i, r in enumerate(sched.candidates())}

    def arrange(self, admitted: list[Entry], order: dict[int, int]) -> list[Entry]:
        return sorted(admitted, key=lambda e: order.get(e.rid, -1))
