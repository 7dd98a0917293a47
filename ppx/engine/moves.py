"""Who hears about a request's moves through one rank's scheduler: the conservation ledger
(engine/conservation.py: in, out, committed), the retract chokepoint's listener (every
re-queue reports its rid: engine.admission.told_scope=epoch_retract clears a told row there)
the rank's event log (the admissions since it last looked) and, under PPX_DEBUG=1, the trace.
Kept across plans: a flip's new scheduler gets the same."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ppx.engine.conservation import Conservation


@dataclass
class Moves:
    ledger: Conservation | None = None
    on_requeue: Callable[[int], None] | None = None
    trace: Callable[[str], None] | None = None
    # (rid, prefix_len) admitted since the rank last looked: its event log's `admit` lines
    admitted: list[tuple[int, int]] = field(default_factory=list)

    def report_admits(self, emit: Callable[..., None], pass_id: int, slot: int, epoch: int) -> None:
        """The admissions since the last report, as `admit` events of the pass that made them
        (the PP phase's schedule or decision step, the TP phase's batch)."""
        for rid, prefix in self.admitted:
            emit("admit", pass_id, slot, rid, epoch, f"prefix_len={prefix}")
        self.admitted.clear()

    def took(self, rid: int, where: str) -> None:
        if self.ledger is not None:
            self.ledger.took(rid, where)

    def left(self, rid: int) -> None:
        if self.ledger is not None:
            self.ledger.left(rid)

    def committed(self) -> None:
        if self.ledger is not None:
            self.ledger.committed()

    def requeued(self, rid: int) -> None:
        if self.on_requeue is not None:
            self.on_requeue(rid)
