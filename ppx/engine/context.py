"""What a rank's collaborators (the admission seams, flip control, TP phase) may touch.

They get this small context instead of the rank's whole loop: who this rank is and who its
neighbours are, the typed config, the wire (transport + channels), the status board and the
event log, the rank's injected faults, the epoch, the current execution plan (phase, model, cache, scheduler), and
`stop`. That is the line between protocol and plumbing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from ppx.core import StopRun
from ppx.engine.faults.rank_faults import RankFaults

if TYPE_CHECKING:
    from ppx.config import PPXConfig
    from ppx.engine.board import RankBoard
    from ppx.engine.cache.kv import KVCache
    from ppx.engine.channels import Channels
    from ppx.engine.model.stage import Stage
    from ppx.engine.scheduler import Scheduler
    from ppx.engine.transport.base import Transport
    from ppx.telemetry.events import EventLog


@dataclass
class Plan:
    """What this rank runs in its current phase (replaced whole at a flip's cutover)."""

    phase: str  # "pp" | "tp"
    model: Stage
    cache: KVCache
    sched: Scheduler
    num_slots: int  # S = pp in the PP phase, 1 in the TP phase


class RankContext:
    def __init__(
        self,
        rank: int,
        world: int,
        cfg: PPXConfig,
        t: Transport,
        ch: Channels,
        board: RankBoard,
        events: EventLog,
        faults: RankFaults | None = None,
    ) -> None:
        self.rank, self.world, self.cfg = rank, world, cfg
        # this rank's injected faults, by hook kind (ppx/engine/faults/)
        self.faults = faults if faults is not None else RankFaults(cfg, rank, t)
        self.t, self.ch, self.board, self.events = t, ch, board, events
        self.prev, self.next = (rank - 1) % world, (rank + 1) % world
        self.is_first, self.is_last = rank == 0, rank == world - 1
        self.epoch = 0
        self.plan: Plan | None = None
        self.stop_reason: str | None = None

    @property
    def current(self) -> Plan:
        """The plan in force: the planner installs one before the first pass and replaces it
        at every cutover, so only code run before the rank booted finds none."""
        assert self.plan is not None, f"rank{self.rank} has no plan yet (Planner.switch)"
        return self.plan

    @property
    def phase(self) -> str:
        return self.current.phase

    @property
    def sched(self) -> Scheduler:
        return self.current.sched

    @property
    def cache(self) -> KVCache:
        return self.current.cache

    @property
    def model(self) -> Stage:
        return self.current.model

    @property
    def num_slots(self) -> int:
        return self.current.num_slots

    def stop(self, reason: str, p=None) -> NoReturn:
        """End the run with a named reason (verdict `stopped`, or `livelocked`)."""
        self.stop_reason = reason
        self.events.emit(
            "stop", p.pass_id if p else -1, p.slot if p else -1, epoch=self.epoch, detail=reason
        )
        raise StopRun(reason)
