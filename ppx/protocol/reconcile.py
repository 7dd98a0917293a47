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
- `queue` (before #797c, boot instr19): the waiting queue's radix match only. Every admitted
  request leaves the waiting queue, and a request mid-prefill lives in the chunked pointer
  instead, so from its second chunk on the lookup misses by construction: the follower reports
  a continuation it has computed as a miss (-1, or 0 under `engine.guard.miss=zero`), and the
  pass is retracted and voided. Under `engine.admission.void=keep` (#797b's park) the voided
  chunk is parked, the offer stays flat and the same miss voids every pass: a livelock. The
  fork pins it as `test_the_park_alone_leaves_a_flat_livelock` (efschu/htsglang, commit
  4b204740a0632becc75bd4d0fc8eb08a02b79093,
  test/registered/unit/managers/test_pp_retracted_pass_void_797.py: "#797c blinded", the
  reader that answered "not in the waiting queue, so nothing known").
- `running` (the default, sgl-project#944's fourth lookup): the slot's request, then the
  running batch. Under `engine.admission.void=keep_running` a follower keeps a voided
  request whose final chunk it ran in its slot's running batch, where "its chunked prefill
  finished" puts it; rank 0 re-offers it as a fresh admission. `slot` and `scheduler` read
  the waiting queue for a fresh admission and miss it; `running` finds it, measures its tree
  and takes the kept copy back to the queue to run the decision (counter
  `reconcile_running_answers`). With any other void no follower holds a rid there when a
  decision names it, and `running` answers as `slot` does.

Together with `void=keep` and two or more slots in flight: the void of one slot restores that
slot's snapshot while another slot's decision is being reconciled, the kept request is in
neither place the lookup reads, the miss is read as a measurement, the pass is retracted and
voided, and its void restores the other slot's snapshot. boot_798 never served a request:
2212 consecutive `told=98304 local=0` for one rid, voids alternating slots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.protocol.views import SchedulerView

AXIS = Axis(
    "engine.admission.reconcile",
    "reconcile",
    "how a follower answers whether it holds a rid mid-prefill",
    default="running",
    counters=(
        Counter("reconcile_misses"),  # scheduler: a rid the lookup found nowhere
        Counter("reconcile_slot_answers"),  # slot: the slot's request answered a clobbered pointer
        Counter("reconcile_running_answers"),  # running: the running batch answered (#944)
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
    # where this lookup looks for a rid, in the log's words (#944's escalation names them)
    places: tuple[str, ...] = ("waiting queue", "chunked pointer (chunked_req)")
    unread: tuple[str, ...] = ("slot", "running batch")

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.misses = self.slot_answers = self.running_answers = 0

    def where(self) -> str:
        """The places this lookup reads, and the ones it never reads (the #944 escalation)."""
        text = ", ".join(self.places)
        return text + (f" (never the {' or the '.join(self.unread)})" if self.unread else "")

    def rehome(self, sched: SchedulerView, req: Req) -> None:
        """A fresh admission names `req`, which this rank holds outside its waiting queue (a
        void kept it in a slot's running batch, engine.admission.void=keep_running): the
        kept copy goes back to the queue (its computed KV stays in the tree) and the
        decision runs as told."""
        sched.requeue(req)

    def held_chunked(self, sched: SchedulerView, req: Req, parks: bool) -> bool:
        """Does this rank hold `req` mid-prefill, as this lookup sees it? (`parks`: a void
        keeps such a request in place, engine.admission.void=keep.)"""
        return req is sched.chunked

    def missed(self, sched: SchedulerView, req: Req, e, parks: bool) -> bool:
        """The lookup found `req` nowhere it reads (a miss, not a measurement)."""
        return False

    def repoint(self, sched: SchedulerView, req: Req) -> None:
        """The slot's own request answered where the scheduler-wide pointer had been restored
        to another slot's snapshot: it is this pass's chunked request again."""
        self.slot_answers += 1
        sched.resume_chunked(req)

    def counters(self) -> dict[str, int]:
        return {
            "reconcile_misses": self.misses,
            "reconcile_slot_answers": self.slot_answers,
            "reconcile_running_answers": self.running_answers,
        }


def fresh_miss(sched: SchedulerView, req: Req, e, held: bool) -> bool:
    """A fresh admission of a rid this rank neither holds mid-prefill nor has in its waiting
    queue: the log's lookup chain (waiting queue -> chunked_req -> the slot's request) found
    it nowhere."""
    return not e.continues and not held and req not in sched.waiting


class SlotScoped(Reconcile):
    name = "slot"
    ref = "sgl-project#798 (the fix)"
    about = "the slot in flight answers for its own request"
    places = (*Reconcile.places, "slot")
    unread: tuple[str, ...] = ("running batch",)

    def held_chunked(self, sched: SchedulerView, req: Req, parks: bool) -> bool:
        # the slot's own continuation (per_slot: its cell; one: the pointer, the same thing)
        return req is sched.cont() or (parks and sched.holds_mid_prefill(req))

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        return means_nothing(cls.switch(), cfg)

    def missed(self, sched: SchedulerView, req: Req, e, parks: bool) -> bool:
        if fresh_miss(sched, req, e, self.held_chunked(sched, req, parks)):
            self.misses += 1  # the running batch is the one place this chain never reads
            return True
        return False


class RunningBatch(SlotScoped):
    name = "running"
    ref = "sgl-project#944 (the fourth lookup)"
    about = "the slot's request, then the running batch, where a finished prefill lives"
    places = (*SlotScoped.places, "running batch")
    unread = ()

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        return None  # the default: with no void that keeps a finished prefill it is `slot`

    def missed(self, sched: SchedulerView, req: Req, e, parks: bool) -> bool:
        if fresh_miss(sched, req, e, self.held_chunked(sched, req, parks)) and (
            sched.holds_running(req)
        ):
            self.running_answers += 1  # found where the other lookups never read
            return False
        return super().missed(sched, req, e, parks)


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

    def missed(self, sched: SchedulerView, req: Req, e, parks: bool) -> bool:
        if self.held_chunked(sched, req, parks):
            return False
        if e.continues or req not in sched.waiting:
            self.misses += 1
            return True
        return False


class WaitingQueue(Reconcile):
    name = "queue"
    ref = "before #797c (boot instr19; efschu/htsglang 4b204740a0)"
    about = "the waiting queue only: a request mid-prefill is a miss from its second chunk on"
    places = ("waiting queue",)
    unread = ("chunked pointer (chunked_req)", "slot", "running batch")

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        return means_nothing(cls.switch(), cfg)

    def missed(self, sched: SchedulerView, req: Req, e, parks: bool) -> bool:
        if req in sched.waiting:
            return False
        # an admitted request left the queue; mid-prefill it lives in the chunked pointer,
        # which this lookup never reads: a continuation this rank computed is "nothing known"
        self.misses += 1
        return True
