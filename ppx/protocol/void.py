"""`engine.admission.void`: what a voided pass does with the requests it held (#797, #797b
`pp_void_keeps_request`, #797c).

- `requeue` (default): every member goes back to the waiting queue on every rank (its computed
  KV stays in the tree).
- `keep`: a member that was mid-prefill before the pass (the slot's chunked request) stays
  where it is, parked back to where the pass found it (#797b `_park_chunked_prefill_chunk`),
  and the void restores the scheduler-wide pointer from the slot's snapshot.
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.reconcile import means_nothing

AXIS = Axis(
    "engine.admission.void",
    "void",
    "what a voided pass does with the requests it held",
    default="requeue",
    counters=(Counter("void_kept"),),
)


class VoidMode(Variant):
    axis = AXIS
    parks = False  # a mid-prefill member stays in place

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.kept = 0

    def void(self, sched, batch) -> list:
        """Undo a voided pass on this rank; returns the requests put back in the queue."""
        return sched.void(batch)

    def counters(self) -> dict[str, int]:
        return {"void_kept": self.kept}


class Requeue(VoidMode):
    name = "requeue"
    ref = "sgl-project#798 (the fix's companion)"
    about = "every member back to the waiting queue"


class Keep(VoidMode):
    name = "keep"
    ref = "#797b pp_void_keeps_request"
    about = "the slot's mid-prefill request parked in place, the pointer restored"
    parks = True

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        return means_nothing(cls.switch(), cfg)

    def void(self, sched, batch) -> list:
        before = sched.chunked_before[batch.slot]
        # only a request still resident mid-prefill is the scheduler's (an earlier void may
        # have re-queued it: restoring that one would queue it twice)
        resident = before is not None and before.row >= 0 and before not in sched.waiting
        kept = []
        for e in batch.entries:
            req = sched.reqs.get(e.rid)
            if resident and req is before and e.continues:
                if batch.incarnation.get(e.rid) == req.admit_seq:
                    # parked back to where the pass found it, on every rank the same number
                    sched.park(req, e.prefix_len)
                    kept.append(e.rid)
        self.kept += len(kept)
        requeued = sched.void(batch, keep=set(kept))
        # the per-slot restore: what this slot found, whoever wrote the pointer since
        sched.resume_chunked(before if resident else None, batch.slot)
        return requeued
