"""`engine.admission.told_scope`: how long a follower's `told` lives -- for its pass, or as a
row stamped on the request.

- `pass` (default, the end state, sgl-project#1063): a told is used in the pass whose decision
  carried it and nowhere else.
- `promise` (sgl-project#1059): the told is stamped on the request and applied again at a later
  admission of it. Across a TP<->PP cutover the trees are dropped, so the promise names a
  prefix no rank holds any more: the follower stops the group by name (the log's
  `UniformWidthPromiseBroken`, boots 30/31).
- `epoch` (sgl-project#1061): the stamp carries the epoch it was decided in and is applied only
  in that epoch, so a stale row after a completed cutover is ignored.
- `epoch_retract` (sgl-project#1061b): the epoch gate, plus the row cleared at the retract
  chokepoint (`Scheduler.requeue`): a retraction states that the request no longer holds the
  prefix the row describes, so the row is stale by definition, whatever the epoch says.

Where a row is applied: at a follower's later admission of the request (`check`), and at the
re-admission of a cutover's residents (`readmit`, the log's `_release_residents_for_cutover` ->
`_add_request_to_queue`). When that re-admission sees the new epoch is `flip.epoch_advance`
(ppx/protocol/flip.py): `release` advances it first (the gate sees the stale row),
`completion` (the log's clock) after, so a row decided at epoch N is applied at epoch N to a
request whose tree the same cutover dropped (boot 31).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.protocol.views import RankView

AXIS = Axis(
    "engine.admission.told_scope",
    "told_scope",
    "how long a follower's told lives: its pass, or a row stamped on the request",
    default="pass",
    counters=(
        Counter("told_rows_applied"),
        Counter("told_rows_ignored_stale"),
        Counter("told_cleared_at_retract"),  # epoch_retract: rows cleared at a re-queue
    ),
)


class ToldScope(Variant):
    axis = AXIS
    gated = False  # a row of another epoch is refused (ignored)
    clears_at_retract = False

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.epoch_advance = cfg.flip.epoch_advance  # named in a stop's reason only
        self.rows: dict[int, tuple[int, int]] = {}  # rid -> (told, decided epoch)
        self.applied = self.ignored_stale = self.cleared_at_retract = 0

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if cls is Pass:
            return None
        if not policy_of(cfg).decides:
            return (
                f"{cls.switch()} needs a decision to stamp: engine/admission=decision or forwarded"
            )
        if not cfg.flip.enabled:
            return (
                f"{cls.switch()} means nothing without flips: a told row outlives its pass "
                "only across a TP<->PP cutover (set flip=...)"
            )
        return None

    def stamp(self, rid: int, told: int, epoch: int) -> None:
        self.rows[rid] = (told, epoch)

    def check(self, ctx: RankView, rid: int, local: int, told_now: int) -> None:
        """At an admission of `rid` on a follower: a row stamped in another epoch (a cutover
        dropped the trees since) is applied or refused by the gate. Rows of this epoch are
        re-stamped by this pass's own decision."""
        row = self.rows.get(rid)
        if row is None or row[1] == ctx.epoch:
            return
        self._apply(ctx, rid, row, local, f"this pass told {told_now}")

    def readmit(self, ctx: RankView, rid: int, local: int) -> None:
        """A cutover re-admits its resident `rid` after dropping the tree (`local` is what
        the new tree holds of it): the row is applied unless the epoch gate refuses it."""
        row = self.rows.get(rid)
        if row is not None:
            why = f"re-admitted by the cutover (flip.epoch_advance={self.epoch_advance})"
            self._apply(ctx, rid, row, local, why)

    def _apply(self, ctx: RankView, rid: int, row: tuple[int, int], local: int, why: str) -> None:
        if self.gated and row[1] != ctx.epoch:
            self.ignored_stale += 1
            del self.rows[rid]
            return
        self.applied += 1
        if row[0] > local:
            ctx.stop(
                f"told row outlived its pass ({self.switch()}): "
                f"rank{ctx.rank} rid={rid} promised told={row[0]} (decided at epoch {row[1]}) "
                f"> local={local} at epoch {ctx.epoch}; {why}"
            )

    def retracted(self, rid: int) -> None:
        """The retract chokepoint (every re-queue passes it); group-uniform, because every
        rank retracts the same rid at the same pass."""
        if self.clears_at_retract and self.rows.pop(rid, None) is not None:
            self.cleared_at_retract += 1

    def drop(self, rid: int) -> None:
        self.rows.pop(rid, None)

    def holds(self, rid: int) -> bool:
        return rid in self.rows

    def counters(self) -> dict[str, int]:
        return {
            "told_rows_applied": self.applied,
            "told_rows_ignored_stale": self.ignored_stale,
            "told_cleared_at_retract": self.cleared_at_retract,
        }


class Pass(ToldScope):
    name = "pass"
    ref = "sgl-project#1063"
    about = "a told is used in its own pass only"

    def stamp(self, rid: int, told: int, epoch: int) -> None:
        pass  # nothing outlives the pass


class Promise(ToldScope):
    name = "promise"
    ref = "sgl-project#1059"
    about = "the told is stamped on the request and applied at a later admission"


class Epoch(ToldScope):
    name = "epoch"
    ref = "sgl-project#1061"
    about = "the stamp is applied only in the epoch it was decided in"
    gated = True


class EpochRetract(ToldScope):
    name = "epoch_retract"
    ref = "sgl-project#1061b"
    about = "the epoch gate, and the row cleared at the retract chokepoint"
    gated = True
    clears_at_retract = True
