"""`engine.admission.reconcile`: how a follower answers "do I hold this rid mid-prefill?"
(sgl-project#798).

- `slot` (default): from the request of the slot whose decision is being reconciled. Under
  `engine.admission.void=keep` a request this rank holds mid-prefill (a row, not queued, not
  pinned to a slot) is held whatever another slot's void restored into the scheduler-wide
  pointer since; the slot's own request then answers where the pointer was clobbered
  (counter `reconcile_slot_answers`).
- `scheduler`: from ONE scheduler-wide chunked pointer, then the waiting queue's radix match;
  a rid found in neither is a miss (-1, or 0 under `engine.guard.miss=zero`, which is what the
  log's reconcile wrote before sgl-project#944). With one slot in flight the two are the same.

Together with `void=keep` and two or more slots in flight: the void of one slot restores that
slot's snapshot while another slot's decision is being reconciled, the kept request is in
neither place the lookup reads, the miss is read as a measurement, the pass is retracted and
voided, and its void restores the other slot's snapshot. boot_798 never served a request:
2212 consecutive `told=98304 local=0` for one rid, voids alternating slots.
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.policy import policy_of

AXIS = Axis(
    "engine.admission.reconcile",
    "reconcile",
    "how a follower answers whether it holds a rid mid-prefill",
    default="slot",
    counters=(
        Counter("reconcile_misses"),  # scheduler: a rid the lookup found nowhere
        Counter("reconcile_slot_answers"),  # slot: the slot's request answered a clobbered pointer
    ),
)


def means_nothing(switch: str, cfg: Any) -> str | None:
    """A reconcile or void design other than the default needs a decision to reconcile and a
    pass that can be voided."""
    p = policy_of(cfg)
    if p.decides and not p.never_voids:
        return None
    what = (
        "never voids nor reconciles a decision"
        if p.decides
        else "has no decision to reconcile and no voids"
    )
    return f"{switch} means nothing: engine/admission={p.name} {what}"


class Reconcile(Variant):
    axis = AXIS

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.misses = self.slot_answers = 0

    def held_chunked(self, sched, req, parks: bool) -> bool:
        """Does this rank hold `req` mid-prefill, as this lookup sees it? (`parks`: a void
        keeps such a request in place, engine.admission.void=keep.)"""
        return req is sched.chunked

    def missed(self, sched, req, e, parks: bool) -> bool:
        """The lookup found `req` nowhere it reads (a miss, not a measurement)."""
        return False

    def repoint(self, sched, req) -> None:
        """The slot's own request answered where the scheduler-wide pointer had been restored
        to another slot's snapshot: it is this pass's chunked request again."""
        self.slot_answers += 1
        sched.resume_chunked(req)

    def counters(self) -> dict[str, int]:
        return {"reconcile_misses": self.misses, "reconcile_slot_answers": self.slot_answers}


class SlotScoped(Reconcile):
    name = "slot"
    ref = "sgl-project#798 (the fix)"
    about = "the slot in flight answers for its own request"

    def held_chunked(self, sched, req, parks: bool) -> bool:
        # the slot's own continuation (per_slot: its cell; one: the pointer, the same thing)
        return req is sched.cont() or (parks and sched.holds_mid_prefill(req))


class SchedulerWide(Reconcile):
    name = "scheduler"
    ref = "before sgl-project#798"
    about = "one scheduler-wide chunked pointer, then the waiting queue"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if (why := means_nothing(cls.switch(), cfg)) is not None:
            return why
        if int(cfg.pp) < 2:
            return (
                f"{cls.switch()} needs two or more slots in flight: pp={cfg.pp} runs one slot, "
                "where the scheduler-wide pointer IS the slot's (sgl-project#798)"
            )
        return None

    def missed(self, sched, req, e, parks: bool) -> bool:
        if self.held_chunked(sched, req, parks):
            return False
        if e.continues or req not in sched.waiting:
            self.misses += 1
            return True
        return False
