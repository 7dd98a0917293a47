"""`engine.admission.void`: what a voided pass does with the requests it held (#797, #797b
`pp_void_keeps_request`, #797c).

- `requeue` (default): every member goes back to the waiting queue on every rank (its computed
  KV stays in the tree).
- `keep`: a member that was mid-prefill before the pass (the slot's chunked request) stays
  where it is, parked back to where the pass found it (#797b `_park_chunked_prefill_chunk`),
  and the void restores the scheduler-wide pointer from the slot's snapshot.
- `keep_running`: the #944 specimen's void. A follower that ran the voided pass's FINAL chunk
  of a request (a rank upstream of the one that retracted) keeps it where a finished chunked
  prefill lives: pinned to the slot, in its running batch (`pp_void_keeps_request` over a
  finished prefill: "every own-void released 0 of 1 request"), and keeps it there when its own
  refusal of the re-offer voids that pass too. Rank 0, which decides, re-queues every member
  and re-offers it as a fresh admission, so every later decision names a rid this follower
  holds in its running batch: only a lookup that reads the running batch
  (engine.admission.reconcile=running, #944's fourth lookup) finds it. Everything else is
  re-queued as with `requeue`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.reconcile import means_nothing

if TYPE_CHECKING:
    from ppx.protocol.views import SchedulerView

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

    def void(self, sched: SchedulerView, batch, first: bool = False) -> list:
        """Undo a voided pass on this rank (`first`: rank 0, which decides); returns the
        requests put back in the queue."""
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

    def void(self, sched: SchedulerView, batch, first: bool = False) -> list:
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


class KeepRunning(VoidMode):
    name = "keep_running"
    ref = "#797b pp_void_keeps_request over a finished prefill (sgl-project#944's specimen)"
    about = "a follower keeps a request whose final chunk it ran in its slot's running batch"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if (why := means_nothing(cls.switch(), cfg)) is not None:
            return why
        if int(cfg.pp) < 3:
            return (
                f"{cls.switch()} needs pp >= 3: only a follower upstream of the rank that "
                f"refused runs a voided pass's final chunk, and pp={cfg.pp} has none"
            )
        return None

    def void(self, sched: SchedulerView, batch, first: bool = False) -> list:
        kept = set()
        for e in [] if first else batch.entries:  # rank 0 re-queues: it re-offers the rid
            req = sched.reqs.get(e.rid)
            if req is None:
                continue
            ran = batch.launched and e.final and batch.incarnation.get(e.rid) == req.admit_seq
            if ran:
                sched.keep_running(req)  # this follower ran its final chunk: a resident now
            if ran or sched.holds_running(req):
                # and a rid a void kept before stays kept when this follower's own refusal
                # voids the re-offer: "every own-void released 0 of 1 request" (boot_798)
                kept.add(e.rid)
        self.kept += len(kept)
        return sched.void(batch, keep=kept)
