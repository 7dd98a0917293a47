"""`engine.guard.unit`: what one voided pass teaches rank 0's guard about a rid: one round, or
one report per rank that could not run it (sgl-project#630, #791, #944).

In the log a decision makes one trip down the pipeline and back; the FIRST rank that cannot
honour an entry marks it retracted with its own `observed_local`, and every later rank passes
the marked entry through verbatim (#791's exactly-once), so a returned decision carries one
report per rid. The #630 floor and the #944 unresolved count are therefore per round: pp=3,
rank 1 holding 64 and rank 2 holding 50 of a 120-token offer gives tolds 120 -> 64 -> 50 ->
served (`TerminationAcrossMoreThanOneDownstreamRankTest`), and the cap of 3 pins told=0 on the
fourth offer however many ranks missed.

ppx's followers check every entry themselves, so a void's obs can hold a row per rank for one
rid (two followers both short, or both unresolved). How rank 0 reads those rows is this axis:

- `rounds` (default): the first retracting rank's row per rid, the log's unit. Later rows
  for the same rid are folded away (counter `reports_folded`).
- `reports`: every row counts: the floor jumps to the lowest rank's local at once
  (120 -> 50), and two unresolved followers count two toward the defer cap per void, so the
  cap escalates after ceil((cap + 1) / followers) voids instead of cap + 1.
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Counter, Variant, select
from ppx.protocol.guard.floors import AXIS as FLOORS
from ppx.protocol.guard.floors import Off

AXIS = Axis(
    "engine.guard.unit",
    "guard_unit",
    "what one voided pass teaches the guard about a rid: a round or every rank's report",
    default="rounds",
    counters=(Counter("reports_folded"),),  # rows a round did not count (a later rank's)
)


class GuardUnit(Variant):
    axis = AXIS

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.folded = 0

    def rows(self, obs: list[list[int]]) -> list[list[int]]:
        """The rows of one void's obs ([rank, rid, told, local], upstream rank first: each rank
        prepends what it received) that the guard learns from."""
        return obs

    def counters(self) -> dict[str, int]:
        return {"reports_folded": self.folded}


class Rounds(GuardUnit):
    name = "rounds"
    ref = "sgl-project#630, #791 exactly-once, #944"
    about = "the first retracting rank's row per rid: one report per voided pass"

    def rows(self, obs: list[list[int]]) -> list[list[int]]:
        seen: set[int] = set()
        out = []
        # the obs are in rank order, so the first row of a rid is the first rank that could
        # not run it: the one that would have marked the entry retracted in the log
        for row in sorted(obs, key=lambda r: r[0]):
            if row[1] in seen:
                self.folded += 1
                continue
            seen.add(row[1])
            out.append(row)
        return out


class Reports(GuardUnit):
    name = "reports"
    ref = "ppx before issue 26 (no log design: every follower checks every entry)"
    about = "every rank's row counts: a floor from the lowest local, a defer per rank"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if select(cfg, FLOORS.key) == Off.name:
            return f"{cls.switch()} means nothing: engine/guard=off learns nothing from a void"
        if int(cfg.pp) < 3:
            return (
                f"{cls.switch()} needs pp >= 3: at pp={cfg.pp} one follower reports, so a "
                "round and a report are the same"
            )
        return None
