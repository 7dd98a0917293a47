"""`engine.guard.prefix_clear`: when a prefix floor clears (sgl-project#963).

- `serve` (default): the moment the group serves that prefix (a prefill that was not voided).
- `never`: kept for good, the "clear-on-serve withdrawn" mutant #963 rejected (a healed prefix
  loses its reuse for the rest of the run).
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Variant, select
from ppx.protocol.guard.floors import AXIS as FLOORS
from ppx.protocol.guard.floors import PrefixFloor

AXIS = Axis(
    "engine.guard.prefix_clear",
    "prefix_clear",
    "when a prefix floor clears",
    default="serve",
)


class PrefixClear(Variant):
    axis = AXIS
    clears = True


class Serve(PrefixClear):
    name = "serve"
    ref = "sgl-project#963"
    about = "cleared when the group serves the prefix"


class Never(PrefixClear):
    name = "never"
    ref = "the mutant #963 withdrew"
    about = "kept for good: a healed prefix loses its reuse"
    clears = False

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        guard = select(cfg, FLOORS.key)
        if guard != PrefixFloor.name:  # the only design that keeps prefix floors
            return (
                f"{cls.switch()} needs engine/guard=prefix (engine/guard={guard} keeps no "
                "prefix floors)"
            )
        return None
