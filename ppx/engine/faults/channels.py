"""A rank's channels with the `Wire` hooks of the active faults around `send`
(ppx/engine/channels.py; the faults themselves: wire.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ppx.core import Message
from ppx.engine.channels import Channels
from ppx.engine.faults.base import Wire

if TYPE_CHECKING:
    from ppx.engine.scheduler import Scheduler


class FaultyChannels(Channels):
    def __init__(self, *args, wires: list[Wire], sched_of: Callable[[], Scheduler]) -> None:
        super().__init__(*args)
        self.wires = wires  # in the registry's order: a lost message is never also delayed
        self.sched_of = sched_of  # () -> the rank's current scheduler (faults.corrupt reads it)

    def send(self, dst: int, msg: Message) -> None:
        for w in self.wires:
            out = w.outgoing(self, dst, msg)
            if out is None:
                return
            msg = out
        self.stamp(dst, msg)
        for w in self.wires:
            if not w.posting(self, dst, msg):
                return
        self.post(dst, msg)


def channels_for(
    rank: int,
    world: int,
    t,
    board,
    device: str,
    wires: list[Wire],
    readiness_budget_s: float | None,
    sched_of: Callable[[], Scheduler],
) -> Channels:
    """Plain channels, or channels with this rank's `Wire` faults around `send`.
    `sched_of`: the rank's current scheduler (a flip replaces it), asked when a fault needs it."""
    args = (rank, world, t, board, device, readiness_budget_s)
    if not wires:
        return Channels(*args)
    return FaultyChannels(*args, wires=wires, sched_of=sched_of)
