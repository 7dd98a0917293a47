"""`engine.guard.defer_streak`: what the per-rid unresolved streak toward the defer cap is keyed
on (sgl-project#944 / #987 Part A).

- `refusal` (default, #987 Part A): keyed on the rid's refusals: it survives a change of offer,
  the escalation holds until the rid is served, and a refused told<=0 counts like any other.
- `offer` (the #944 era): keyed on rank 0's offer: a different `told` for the rid restarts it,
  and a told<=0 offer is honourable by definition, so its refusal is never counted. The cap's
  own pin (told=0) is such a change, so an escalation lasts one offer; if that told=0 is
  refused, the next offer is the measured one again and the streak starts over: boot 7's
  alternation (told 7939 / 0, 1 termination in 506 laps).
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Counter, Variant, select
from ppx.protocol.guard.floors import AXIS as FLOORS
from ppx.protocol.guard.floors import Off
from ppx.protocol.guard.miss import AXIS as MISS
from ppx.protocol.guard.miss import Zero

AXIS = Axis(
    "engine.guard.defer_streak",
    "defer_streak",
    "what the per-rid unresolved streak toward the defer cap is keyed on",
    default="refusal",
    counters=(
        Counter("defer_streak_resets"),  # streaks restarted by a changed offer
        Counter("unresolved_exempt"),  # unresolved reports on a told<=0 offer, never counted
    ),
)


class DeferStreak(Variant):
    axis = AXIS
    offer_keyed = False


class Refusal(DeferStreak):
    name = "refusal"
    ref = "sgl-project#987 Part A"
    about = "keyed on the rid's refusals: survives a changed offer"


class Offer(DeferStreak):
    name = "offer"
    ref = "sgl-project#944 (boot 7)"
    about = "keyed on rank 0's offer: a changed told restarts it, told<=0 is exempt"
    offer_keyed = True

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        g = cfg.engine.guard
        if select(cfg, FLOORS.key) == Off.name:
            return f"{cls.switch()} means nothing: engine/guard=off counts no streak"
        if int(g.defer_cap) <= 0:
            return (
                f"{cls.switch()} means nothing with engine.guard.defer_cap={g.defer_cap}: the "
                "bound is disabled, so no streak is counted toward it"
            )
        if select(cfg, MISS.key) == Zero.name:
            return (
                f"{cls.switch()} means nothing with engine.guard.miss=zero: no rank ever "
                "reports unresolved, so the streak never counts"
            )
        return None
