"""`engine.admission.geometry`: where a `decision` follower's chunk lengths come from.

- `told` (default): the follower executes rank 0's (prefix_len, extend_len) after truncating
  its own match to told; a disagreement on the extend is a named stop (`chunk geometry`).
- `rederive` (#791 slice 1, the log's decision mode): truncate to told, then the adder derives
  both numbers again from this rank's own state, so a prefix its tree holds beyond told (or a
  host load that landed meanwhile) comes back -- instr20: told 0, load-back 512, a 333-token
  batch against rank 0's 512 rows. Nothing compares here: the proxy width check sees it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.core import Entry
from ppx.protocol.axis import Axis, Variant
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.protocol.views import SchedulerView

AXIS = Axis(
    "engine.admission.geometry",
    "geometry",
    "where a decision follower's chunk lengths come from",
    default="told",
)


class Geometry(Variant):
    axis = AXIS
    compares = True  # the follower checks its computed extend against rank 0's

    def admit(
        self, sched: SchedulerView, req: Req, e: Entry, budget: int, held: bool
    ) -> Entry | None:
        """Admit the decision's entry `e` for `req` on this follower (`held`: it continues a
        prefill this rank holds)."""
        return sched.admit_entry(req, e.prefix_len, e.extend_len)  # truncates local to told


class Told(Geometry):
    name = "told"
    ref = "#791 forwarded slice 1"
    about = "execute rank 0's lengths"


class Rederive(Geometry):
    name = "rederive"
    ref = "#791 slice 1 (instr20)"
    about = "truncate to told, then derive both lengths again from this rank's own tree"
    compares = False

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        p = policy_of(cfg)
        if p.decides and not p.executes:
            return None
        why = "executes rank 0's lengths by definition)" if p.decides else "has no told)"
        return f"{cls.switch()} is a design of engine/admission=decision (engine/admission={p.name} {why}"

    def admit(
        self, sched: SchedulerView, req: Req, e: Entry, budget: int, held: bool
    ) -> Entry | None:
        if held:
            return super().admit(sched, req, e, budget, held)
        sched.cache.land_prefetches()
        prefix = max(e.prefix_len, sched.cache.tree_match(req.tokens))
        return sched.admit_entry(req, prefix, budget)
