"""`engine.admission.on_refusal`: what forwarded execution does with a row a follower cannot
execute (sgl-project#1153: the rank-local compensation by a void was withdrawn for a group
STOP that names the numbers). Only a policy whose followers execute rank 0's rows reads it.
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Variant, select
from ppx.protocol.policy import policy_of

AXIS = Axis(
    "engine.admission.on_refusal",
    "on_refusal",
    "what forwarded execution does with a row a follower cannot execute",
    default=None,
)


class OnRefusal(Variant):
    axis = AXIS
    stops = False  # a refusal ends the run with a named reason
    voids = False  # a refusal voids the pass group-uniformly


class NotRead(OnRefusal):
    name = None
    about = "a policy that retracts (decision) or never refuses (rank_local)"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if policy_of(cfg).executes:
            return f"{AXIS.key}=None: void | stop"
        return None


class _Read(OnRefusal):
    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        p = policy_of(cfg)
        if p.never_voids and not cls.stops:
            return (
                f"{cls.switch()}: engine/admission={p.name} never voids (an unexecutable "
                "row is a group STOP, sgl-project#1153)"
            )
        if p.executes:
            return None
        why = (
            "a retraction always voids the pass (use engine/admission=forwarded to choose)"
            if p.decides
            else "it has no refusals: every rank forms its own batch"
        )
        return f"{cls.switch()} is ignored by engine/admission={p.name}: {why}"


class VoidOnRefusal(_Read):
    name = "void"
    ref = "before sgl-project#1153"
    about = "void the pass group-uniformly; rank 0 re-queues and may retry"
    voids = True


class StopOnRefusal(_Read):
    name = "stop"
    ref = "sgl-project#1153"
    about = "a group STOP naming rank, rid and the numbers"
    stops = True


REFUSALS = {v.name: v for v in (NotRead, VoidOnRefusal, StopOnRefusal)}


def voids(cfg: Any) -> bool:
    """Can this configuration void a pass? A retracting policy always can; forwarded
    execution only when a refusal is answered by a void."""
    p = policy_of(cfg)
    if not p.decides or p.never_voids:
        return False
    return not p.executes or REFUSALS[select(cfg, AXIS.key)].voids
