"""A transport whose moments the test lands by hand: the simulator's timing daemon under
faults.timing=choice, as a fault or the flip schedule sees it (Transport.moment)."""

from __future__ import annotations

from ppx.engine.transport.base import Transport


class HandMoment:
    fired = False

    def landed(self) -> bool:
        return self.fired


class HandTiming(Transport):
    """Each moment asked for is kept, (label, moment), in `armed`, pending until fired; its
    clock stands at 0 (a stopwatch never runs out: only pass counts make a moment due)."""

    now = staticmethod(lambda: 0.0)

    def __init__(self) -> None:
        self.armed: list[tuple[str, HandMoment]] = []

    def moment(self, label: str) -> HandMoment:
        self.armed.append((label, HandMoment()))
        return self.armed[-1][1]
