"""`engine.readiness`: positive evidence before a blocking receive (sgl-project#789, #802).

Before a blocking receive a rank demands evidence that the upstream posted (its sent counter
moved past what this rank consumed, or the inbox holds it). It is a presence signal, not a
timer: the budget (`engine.readiness_budget_s`) is only a backstop after which the silent
wedge becomes a named stop. Off (default), a receive blocks until the watchdog names the
wedge.
"""

from __future__ import annotations

from ppx.protocol.axis import Axis, Param, Variant

AXIS = Axis(
    "engine.readiness",
    "readiness",
    "whether a blocking receive first demands evidence the upstream posted",
    default=False,
    params=(Param("engine.readiness_budget_s", "readiness_budget_s"),),
)


class Readiness(Variant):
    axis = AXIS

    def budget_s(self) -> float | None:
        """The evidence budget a channel waits before a named stop; None: no contract."""
        return None


class NoContract(Readiness):
    name = False
    ref = "before sgl-project#789"
    about = "a receive blocks; the watchdog names the wedge"


class Evidence(Readiness):
    name = True
    ref = "sgl-project#789, #802"
    about = "positive evidence first, else a named stop after the budget"

    def budget_s(self) -> float | None:
        return float(self.cfg.engine.readiness_budget_s)
