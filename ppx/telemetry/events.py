"""Per-rank event log: one JSON line per event, flushed as written, so a rank that is killed
in a wedge still leaves its last events for the post-mortem."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TextIO


class EventLog:
    """`clock` is the rank's (the simulator's virtual time makes `t_s` replay exactly);
    `path=None` keeps no file (the explorer's runs only count), unless `sink` (an open text
    stream the caller owns and reads after the run: the explorer's runs whose end property
    reads events, ppx/sim/gallery_expect.py) takes the lines instead."""

    def __init__(
        self,
        path: str | None,
        rank: int,
        t0: float,
        clock: Callable[[], float] = time.time,
        sink: TextIO | None = None,
    ) -> None:
        self.owned = bool(path)  # a sink is the caller's: closing the log leaves it readable
        self.f = open(path, "w", buffering=1) if path else sink
        self.rank, self.t0, self.clock = rank, t0, clock
        self.counts: dict[str, int] = {}

    def emit(
        self,
        kind: str,
        pass_id: int = -1,
        slot: int = -1,
        rid: int = -1,
        epoch: int = 0,
        detail: str = "",
    ) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        row = {
            "t_s": round(self.clock() - self.t0, 6),
            "rank": self.rank,
            "kind": kind,
            "pass_id": pass_id,
            "slot": slot,
            "rid": rid,
            "epoch": epoch,
            "detail": detail,
        }
        if self.f is not None:
            self.f.write(json.dumps(row) + "\n")

    def close(self) -> None:
        if self.f is not None and self.owned:
            self.f.close()


def read_events(path: str) -> list[dict]:
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut by a kill
    except FileNotFoundError:
        pass
    return rows
