"""`engine.kv.load_back`: who may start a host-tier load-back -- every rank at its own match,
or only for a rid whose extent rank 0 published on an admitted decision.

`local` (default) is sgl-project#1046's end state: each rank loads back at its own match, the
extent derived by one shared expression, so uniformity comes from identical derivation and no
value is shipped. `admitted` is the #1040 delivery chain: a rank (rank 0 included, which
parked its own row for a lap) starts a load only for a rid whose extent a decision carried,
and the decision was built only from what the admission loop admitted. A request whose host
hit is the reason it cannot be admitted yet is skipped as pending, so no decision names it, so
no extent is published, so its load never starts: boot 8's chain (hit present -> prefetch
pending -> skipped -> empty list -> no decision -> no extent -> LOAD-BACK DEFERRED), which
#1041 tried to cut by publishing what the loop saw and #1046 removed by deleting the chain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.protocol.views import CacheView, SchedulerView

AXIS = Axis(
    "engine.kv.load_back",
    "load_back",
    "who may start a host-tier load-back",
    default="local",
    counters=(Counter("load_back_deferred"),),  # a host hit with no extent to load it
)


class LoadBack(Variant):
    axis = AXIS

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.deferred = 0  # matches that found a host hit and no extent to load it with

    def may_load(self, rid: int) -> bool:
        return True

    def match(self, cache: CacheView, req: Req) -> int:
        """This rank's radix match of `req`; -1 while a load-back brings the rest (a match
        that found a host hit it may not load counts as deferred)."""
        may = self.may_load(req.rid)
        local = cache.match(req.tokens, may_load=may)
        self.deferred += local < 0 and not may
        return local

    def published(self, rids) -> None:
        """A decision named these rids: their extents reached this rank."""

    def starved(self, sched: SchedulerView) -> str | None:
        """Rank 0, after forming a pass: a reason to stop the run, or None."""
        return None

    def counters(self) -> dict[str, int]:
        return {"load_back_deferred": self.deferred}


class Local(LoadBack):
    name = "local"
    ref = "sgl-project#1046"
    about = "every rank loads back at its own match, uniform by identical derivation"


class Admitted(LoadBack):
    name = "admitted"
    ref = "sgl-project#1040 (boot 8)"
    about = "a load only for a rid whose extent an admitted decision published"

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.extents: set[int] = set()  # rids some decision published an extent for
        self.idle_passes, self.bound = 0, int(cfg.engine.liveness.livelock_passes)

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if not cfg.engine.kv.host_tier:
            return (
                f"{cls.switch()} needs engine.kv.host_tier=true: without a host tier "
                "there is nothing to load back"
            )
        if not policy_of(cfg).decides:
            return (
                f"{cls.switch()} needs a decision to publish extents: "
                "engine/admission=decision, forwarded or row_authority"
            )
        if int(cfg.pp) < 2:
            return (
                f"{cls.switch()} needs pp >= 2: the extent is shipped from rank 0 to its followers"
            )
        return None

    def may_load(self, rid: int) -> bool:
        return rid in self.extents

    def published(self, rids) -> None:
        self.extents.update(rids)

    def starved(self, sched: SchedulerView) -> str | None:
        """When requests wait, nothing is in flight and no load is under way for
        `engine.liveness.livelock_passes` passes in a row. Only this design can get here: at its own
        match a deferral always has a load behind it, which lands."""
        host = sched.cache.host
        if (
            not sched.waiting
            or sched.num_inflight
            or any(sched.running)
            or (host is not None and host.loading)
        ):
            self.idle_passes = 0
            return None
        self.idle_passes += 1
        if self.idle_passes < self.bound:
            return None
        rids = sorted(r.rid for r in sched.waiting)[:8]
        return (
            f"load-back starved: {self.idle_passes} passes with rids {rids} waiting, nothing in "
            f"flight and no load under way ({self.switch()}: no admitted decision "
            "names them, so no extent is published and their host hits never load)"
        )
