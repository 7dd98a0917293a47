"""`flip.due`: when a flip the schedule calls for may start (the flip churn of issue 26).

A cutover re-queues every resident and releases the KV trees (the layout changes), so a prompt
whose prefill is mid-way when the flip comes restarts from zero in the new layout. With flips
more often than a prompt's chunks fit between them, the same prompt restarts forever and
nothing behind it is admitted (pp=3, chunk 32, 100-200-token prompts, a flip every 6 passes).

- `clock` (ppx's flip schedule before issue 26; the fork's stopwatch dwell): the flip starts
  when `flip.every_passes` / `flip.every_s` ran out, whatever the prefill in progress.
- `drained` (default; the fork's phase policy: "the PP phase is governed by drain, not a
  stopwatch", the prefill mountain is drained, not deferred): a due flip waits while rank 0
  holds a prompt mid-prefill, at most `flip.drain_cap` passes (the fork's stall cap), so every
  phase finishes the prompt it started and commits its token before the trees drop.

Whatever the design, a run that only churns ends `livelocked`, never `timeout`: rank 0 counts
the cutovers and the re-admissions of the residents they re-queued since the last token it
committed; `engine.liveness.livelock_flips` / `engine.liveness.livelock_readmits` of them (0 = no bound) end the
run naming the churn (ppx/engine/churn.py). Only rank 0 counts and decides, as with the void
bound: the followers learn of it as the run's stop.
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Counter, Param, Variant, select
from ppx.protocol.flip import needs_flips

AXIS = Axis(
    "flip.due",
    "flip_due",
    "when a flip the schedule calls for may start: at once, or once no prompt is mid-prefill",
    default="drained",
    counters=(
        Counter("flips_deferred", group=True),  # passes a due flip waited on a prefill (rank 0)
        Counter("readmits", group=True),  # cutover residents admitted again (rank 0)
    ),
    params=(
        Param("flip.drain_cap", "flip_drain_cap"),
        Param("engine.liveness.livelock_flips", "livelock_flips"),
        Param("engine.liveness.livelock_readmits", "livelock_readmits"),
    ),
)


class FlipDue(Variant):
    axis = AXIS

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        for key in ("engine.liveness.livelock_flips", "engine.liveness.livelock_readmits"):
            value = int(select(cfg, key))
            if value < 0:
                return f"{key}={value}: >= 0 (0 = no bound)"
        return None

    def waits(self, mid_prefill: bool, waited: int) -> bool:
        """Rank 0, at a pass where the schedule calls for a flip: does it wait this pass?
        `waited`: the passes it already waited."""
        return False


class Drained(FlipDue):
    name = "drained"
    ref = "the fork's phase policy (TestThePpPhaseIsGovernedByDrainNotAStopwatch)"
    about = (
        "a due flip waits while rank 0 holds a prompt mid-prefill (flip.drain_cap passes at most)"
    )

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.cap = int(cfg.flip.drain_cap)

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        cap = int(cfg.flip.drain_cap)
        if cap < 1:
            return f"flip.drain_cap={cap}: >= 1 passes (flip.due=clock never waits)"
        return super().refuse(cfg)

    def waits(self, mid_prefill: bool, waited: int) -> bool:
        # the chunks computed so far live in this layout's trees, which the cutover releases:
        # flipping now would throw them away; the cap keeps a prompt longer than the cap from
        # holding the phase forever (then the churn bound names it)
        return mid_prefill and waited < self.cap


class Clock(FlipDue):
    name = "clock"
    ref = "ppx's flip schedule before issue 26 (the fork's stopwatch dwell)"
    about = "the flip starts when the schedule says; a prompt mid-prefill restarts from zero"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        why = needs_flips(cls.switch(), cfg, "it says when a flip starts")
        return why if why is not None else super().refuse(cfg)
