"""`engine.admission.follower_seats`: whether a follower's own seat count vetoes a forwarded
schedule (sgl-project#1153, F2 TRIGGER CLASS).

The log's follower ran its rank-local seat-count gates (the sgl-project#823 count arm, its
`batch_full_break`, `get_num_allocatable_reqs`) on rank 0's forwarded schedule. The count was
rank-local, so it said "full" while the follower's allocator could hold the rows: "PP1 reached
1 of the 2 rids PP0 named (batch_full_break)" -> a refusal -> a void (before #1153) or a group
STOP naming the numbers (after #1153's root fix). #1153 F2 removed the trigger class: on a
forwarded schedule the follower's count is not a verdict; only the physical allocator
(POOL_SHORT here) still refuses.

The seat count: ppx has no adaptive admission limiter; the nearest rank-local quantity is the
rank's own free KV slots (the pool minus what requests and the radix tree hold, eviction not
counted). Measured (pp=2, faults=pool_skew 400, workload=random, forwarded): on every one of 24
prefill passes the free-slot count differed between the ranks (rank 0 ~3500 of 4096, rank 1
2..59 of 400), while `cache.available` -- what the allocator admits against -- was equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.core import SEATS_SHORT
from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.protocol.views import SchedulerView

AXIS = Axis(
    "engine.admission.follower_seats",
    "follower_seats",
    "whether a follower's own seat count vetoes a forwarded schedule",
    default="ignore",
    counters=(Counter("seat_vetoes"),),
)


def seat_limit(free_slots: int, chunk_size: int, max_batch: int) -> int:
    """Seats a rank counts for a prefill batch: one per chunk-sized run of free KV slots
    (eviction not counted), capped by the batch's seat cap."""
    return max(0, min(max_batch, free_slots // max(chunk_size, 1)))


class FollowerSeats(Variant):
    axis = AXIS

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.vetoes = 0
        self.note = ""  # the numbers of the last veto, for a stop's reason

    def veto(self, sched: SchedulerView, entries, rank: int, named: set[int]) -> list[list[int]]:
        """Refusal rows [rank, rid, told, SEATS_SHORT] for the rids beyond this rank's own
        count (rids in `named` were refused already)."""
        return []

    def counters(self) -> dict[str, int]:
        return {"seat_vetoes": self.vetoes}


class Ignore(FollowerSeats):
    name = "ignore"
    ref = "sgl-project#1153 F2"
    about = "no seat count on a forwarded schedule; only the allocator refuses"


class Veto(FollowerSeats):
    name = "veto"
    ref = "before sgl-project#1153 F2"
    about = "the follower refuses the rids beyond its own seat count"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        p = policy_of(cfg)
        if not p.executes:
            why = "has no follower" if not p.decides else "retracts on coverage instead"
            return (
                f"{cls.switch()} needs a forwarded schedule (engine/admission=forwarded or "
                f"row_authority); engine/admission={p.name} {why}"
            )
        if int(cfg.pp) < 2:
            return (
                f"{cls.switch()} needs pp >= 2: at pp={cfg.pp} no rank executes another's schedule"
            )
        return None

    def veto(self, sched: SchedulerView, entries, rank: int, named: set[int]) -> list[list[int]]:
        free = len(sched.cache.free)
        seats = seat_limit(free, sched.chunk_size, sched.max_batch)
        if len(entries) <= seats:
            return []
        self.note = (
            f"rank{rank} reached {seats} of the {len(entries)} rids rank 0 named (seat count: "
            f"min(max_batch={sched.max_batch}, free={free} // chunk={sched.chunk_size}) = "
            f"{seats}; allocator available={sched.cache.available})"
        )
        rows = [[rank, e.rid, e.prefix_len, SEATS_SHORT] for e in entries[seats:]]
        rows = [row for row in rows if row[1] not in named]
        self.vetoes += len(rows)
        return rows
