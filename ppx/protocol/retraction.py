"""`engine.admission.retraction`: what a retracting follower does with the rest of a pass when
it cannot honour some of rank 0's entries (sgl-project#791, #791c).

- `pass` (default, #791 as wired, with #797's void): the whole pass is retracted and voided
  group-uniformly; the void travels down the proxy and round the ring, so every rank re-queues
  the same requests and rank 0 learns what each follower could not honour.
- `partial` (#791 as first landed, standalone): the entry is excluded from this rank's
  effective decision, exactly one warning names rank / rid / told / local, and its siblings
  run. Nothing is voided and nothing travels back, so the ranks now run different batches of
  one pass: the next proxy this rank receives carries rows for rank 0's whole batch against
  this rank's narrower one -- boot instr17's "received hidden_states with 126 row(s) for a
  batch of 22 token(s)" (#791c), caught by ppx's proxy width check as a named stop. A follower
  that excludes every entry runs nothing and never pulls the proxy its upstream sent: the
  wedge #791 was written to remove.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.core import Entry
from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.policy import policy_of

if TYPE_CHECKING:
    from ppx.protocol.views import FollowerView

AXIS = Axis(
    "engine.admission.retraction",
    "retraction",
    "what a follower that cannot honour some entries does with the rest of the pass",
    default="pass",
    counters=(Counter("exclusions"),),  # partial: entries a follower dropped, siblings run
)


class Retraction(Variant):
    axis = AXIS

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.exclusions = 0

    def settle(
        self, follower: FollowerView, p, entries: list[Entry], obs: list[list[int]]
    ) -> list[Entry] | None:
        """The entries this follower still runs after `obs` ([rank, rid, told, local] rows it
        cannot honour), or None when the pass is retracted as a whole."""
        follower.retract(p, entries, obs)
        return None

    def counters(self) -> dict[str, int]:
        return {"exclusions": self.exclusions}


class WholePass(Retraction):
    name = "pass"
    ref = "sgl-project#791 (wired), #797"
    about = "the whole pass is voided group-uniformly; rank 0 re-queues and learns"


class Partial(Retraction):
    name = "partial"
    ref = "sgl-project#791 (standalone), #791c (boot instr17)"
    about = "the entry is excluded here, its siblings run: ranks run different batches"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        p = policy_of(cfg)
        if p.decides and not p.executes:
            return None
        why = "executes rank 0's rows and refuses instead" if p.decides else "never retracts"
        return f"{cls.switch()} is a design of engine/admission=decision ({p.name} {why})"

    def settle(
        self, follower: FollowerView, p, entries: list[Entry], obs: list[list[int]]
    ) -> list[Entry] | None:
        follower.warn_each(p, obs, "retract")
        excluded = {row[1] for row in obs}
        self.exclusions += len(excluded)
        return [e for e in entries if e.rid not in excluded]
