"""How many requests a rank may hold mid-prefill, and what keeps it so: three axes.

- `engine.admission.continuations`: where continuations live. `one` (default, the fork's
  invariant, #959 "only one continuation may exist at a time"): one per rank, continued by
  whichever slot schedules next. `per_slot` (the fork's PP loop, boot_798): each slot holds
  and continues its own, only in its own passes, so S can be resident at once while the
  scheduler-wide pointer (`chunked_req`) names the last writer. sgl-project#798 lives here:
  a slot-blind reconcile reads the pointer, and an own-void restores another slot's.
- `flip.continuation`: what a cutover does with a continuation. `retract` (default, ppx's
  cutover): re-queued with the residents, re-prefilled in the new layout from its tree.
  `survive` (the fork's seam: it cleared `chunked_req` only for requests in its retracted
  set; `chunk_blocks_quiescence`): the continuation stays resident, its KV carried into the
  new layout (one all_gather); a one-slot TP plan keeps the one the pointer named in its cell
  and the others resident with no cell.
- `engine.admission.second_continuation`: the sgl-project#959 guard. `refuse` (default): a
  fresh admission that would mint a continuation while one is resident is left for a later
  pass, and a resident continuation with no cell takes the empty cell ("the resident
  continuation is never the one to give way"). `mint` (before #959): nothing asks, and the
  second mint meets the fork's `assert self.chunked_req is None` (a named stop here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.protocol.axis import Axis, Counter, Variant

if TYPE_CHECKING:
    from ppx.protocol.views import SchedulerView

CONTINUATIONS = Axis(
    "engine.admission.continuations",
    "continuations",
    "where a rank's requests mid-prefill live: one per rank or one per slot",
    default="one",
)
CUTOVER = Axis(
    "flip.continuation",
    "flip_continuation",
    "what a cutover does with a continuation: re-queue it or carry it un-retracted",
    default="retract",
    counters=(Counter("carried_at_flip", group=True),),
)
SECOND = Axis(
    "engine.admission.second_continuation",
    "second_continuation",
    "what an admission does that would mint a continuation while one is resident",
    default="refuse",
    counters=(Counter("second_continuation_refusals", group=True),),
)


class Continuations(Variant):
    axis = CONTINUATIONS
    per_slot = False


class One(Continuations):
    name = "one"
    ref = "sgl-project#959 (one continuation at a time)"
    about = "one per rank, continued by whichever slot schedules next"


class PerSlot(Continuations):
    name = "per_slot"
    ref = "the fork's PP loop (`_pp_chunked_req_before_by_slot`, boot_798)"
    about = (
        "each slot holds and continues its own; the scheduler-wide pointer names the last writer"
    )
    per_slot = True

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if int(cfg.pp) < 2:
            return f"{cls.switch()} needs pp >= 2: with one slot per_slot is one"
        return None


class Cutover(Variant):
    axis = CUTOVER
    survives = False  # a continuation stays resident across the cutover, its KV carried

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.carried = 0

    def counters(self) -> dict[str, int]:
        return {"carried_at_flip": self.carried}


class Retract(Cutover):
    name = "retract"
    ref = "ppx's cutover (every resident re-queued; the layout's KV is rebuilt)"
    about = "re-queued with the residents, re-prefilled from its tree in the new layout"


class Survive(Cutover):
    name = "survive"
    ref = "the fork's seam (#959 specimen: window-955-boot, chunk_blocks_quiescence)"
    about = "stays resident un-retracted, its KV carried into the new layout"
    survives = True

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if not cfg.flip.enabled:
            return f"{cls.switch()} means nothing without flips (set flip=...)"
        if int(cfg.pp) < 2:
            return f"{cls.switch()} needs pp >= 2: with one rank both layouts are the same"
        return None


class SecondContinuation(Variant):
    axis = SECOND
    guards = False

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.refusals = 0

    def resume_resident(self, sched: SchedulerView) -> None:
        """Before an admission: a resident continuation with no cell takes the empty one."""

    def may_mint(self, sched: SchedulerView, batch: set[int]) -> bool:
        """May a fresh admission become a continuation now (`batch`: rids admitted so far in
        this pass, resident but not yet placed)?"""
        return True

    def counters(self) -> dict[str, int]:
        return {"second_continuation_refusals": self.refusals}


class Refuse(SecondContinuation):
    name = "refuse"
    ref = "sgl-project#959 (chunked_req_outstanding at every mint site, #994)"
    about = "the fresh admission waits a pass; the resident continuation keeps going"
    guards = True

    # one slot, one cell (the TP phase): with S slots `per_slot` holds one per slot and
    # `void=keep` parks outside the pointer, the #798 world the reconcile designs answer
    def resume_resident(self, sched: SchedulerView) -> None:
        if sched.num_slots == 1 and sched.cont() is None and (resident := sched.strays()):
            # the resident is never the one to give way: it takes the cell, so it is the
            # first candidate and its chunk ends the batch (every rank picks the same one)
            sched.resume_chunked(min(resident, key=lambda r: r.rid))
            self.refusals += 1

    def may_mint(self, sched: SchedulerView, batch: set[int]) -> bool:
        if sched.num_slots > 1 or not sched.strays(but=batch):
            return True
        self.refusals += 1
        return False


class Mint(SecondContinuation):
    name = "mint"
    ref = "before sgl-project#959 (the invariant held by arithmetic)"
    about = "nothing asks; a second mint meets the fork's assert (a named stop)"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if cfg.flip.continuation != Survive.name:
            return (
                f"{cls.switch()} means nothing with flip.continuation={cfg.flip.continuation}: "
                "only a continuation that survives a cutover can be resident with no cell"
            )
        return None
