"""`engine.admission.name`: who forms a pass's prefill batch, and how the ranks agree on it.

The policies are runtime objects of the engine (ppx/engine/admission/); the designs here are
what the rest of the protocol needs to know of them: whether rank 0 decides and the decision
travels, whether followers execute it exactly (a mismatch is a refusal) or compare and retract,
and whether the design may ever void a pass.
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Counter, Param, Variant, select

AXIS = Axis(
    "engine.admission.name",
    "admission",
    "who forms a pass's prefill batch and how the ranks agree on it",
    default="rank_local",
    counters=(
        Counter("voids", group=True),
        Counter("retractions"),
        Counter("refusals"),
        Counter("stops", group=True),
    ),
    params=(Param("engine.liveness.livelock_passes", "livelock_passes"),),
)


class Policy(Variant):
    axis = AXIS
    decides = True  # rank 0 decides and the decision travels on its own channel
    executes = False  # followers execute rank 0's lengths exactly (a mismatch is a refusal)
    never_voids = False  # an unexecutable row is a group STOP, never a void


class RankLocal(Policy):
    name = "rank_local"
    ref = "upstream SGLang"
    about = "every rank forms its batch from its own queue and radix tree"
    decides = False


class Decision(Policy):
    name = "decision"
    ref = "sgl-project#791"
    about = "rank 0 decides; followers truncate (local >= told) or retract (local < told)"


class Forwarded(Policy):
    name = "forwarded"
    ref = "#791 forwarded slice 1"
    about = "followers execute rank 0's (prefix_len, extend_len) exactly; a mismatch is a refusal"
    executes = True


class RowAuthority(Policy):
    name = "row_authority"
    ref = "sgl-project#1071, #1153"
    about = "rank 0's rows are the only truth; an unexecutable row is a group STOP, never a void"
    executes = True
    never_voids = True


POLICIES: dict[str, type[Policy]] = {
    p.name: p for p in (RankLocal, Decision, Forwarded, RowAuthority)
}


def policy_of(cfg: Any) -> type[Policy]:
    """The policy design `cfg` chose (validation has checked the name)."""
    return POLICIES[select(cfg, AXIS.key)]
