"""`engine.admission.prefetch.short`: what rank 0 does with a group completion floor that came
back COMPLETE but short of what it wants (sgl-project#1175; a follower's load terminated with
fewer tokens than rank 0 holds, e.g. matched 0 + loaded 16 of a 24-token prefix).

- `clamp` (default, ppx): tell the floor at once. A COMPLETE row is a terminated load; only the
  follower computing the prefix for another request can raise it, so waiting buys at most the
  tail that later number would spare, and costs the bound every time.
- `defer` (the fork's #1175): a short floor is deferred by name like a pending one, while other
  work proceeds, and clamped when `engine.admission.prefetch.bound_ms` expires ("PP0 admits only
  when the group floor covers what it wants ... When the bound expires, PP0 CLAMPS").
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Variant, select
from ppx.protocol.policy import policy_of

AXIS = Axis(
    "engine.admission.prefetch.short",
    "prefetch_short",
    "what rank 0 does with a group prefetch floor that completed short of what it wants",
    default="clamp",
)


class PrefetchShort(Variant):
    axis = AXIS
    defers = False  # a COMPLETE floor below want waits for the bound (read by the carrier)


class ClampAtOnce(PrefetchShort):
    name = "clamp"
    ref = "ppx (a terminated load does not grow)"
    about = "tell the completed floor at once"


class DeferToBound(PrefetchShort):
    name = "defer"
    ref = "sgl-project#1175 (deferred by name until the length-priced bound)"
    about = "defer a short completed floor like a pending one; clamp when the bound expires"
    defers = True

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        # only the group floor folds followers' completions: elsewhere nothing is short
        floor = select(cfg, "engine.admission.prefetch.floor")
        if floor == "rank0":
            return f"{cls.switch()} needs a group floor (engine.admission.prefetch.floor=rank0)"
        if int(cfg.pp) < 2 or not cfg.engine.kv.host_tier or not policy_of(cfg).executes:
            return (
                f"{cls.switch()} needs the group floor's carrier: pp >= 2, "
                "engine.kv.host_tier=true and forwarded execution"
            )
        return None
