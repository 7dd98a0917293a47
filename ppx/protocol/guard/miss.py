"""`engine.guard.miss`: what a follower reports for a lookup it could not resolve (#797c,
sgl-project#798, sgl-project#944).

- `sentinel` (default, #944): -1 on the wire, never a length; rank 0 defers the rid for a
  round and the per-rid defer cap (`engine.guard.defer_cap`, <= 0 disables it) escalates to
  `told=0`, a named event.
- `zero`: the miss read as local = 0, a measurement nobody made, from which floors are learned
  (what the log's reconcile wrote before #944).
"""

from __future__ import annotations

from ppx.core import UNRESOLVED
from ppx.protocol.axis import Axis, Variant

AXIS = Axis(
    "engine.guard.miss",
    "miss",
    "what a follower reports for a lookup it could not resolve",
    default="sentinel",
)


class Miss(Variant):
    axis = AXIS
    reports_unresolved = True

    def read(self, local: int) -> int:
        return local


class Sentinel(Miss):
    name = "sentinel"
    ref = "sgl-project#944"
    about = "-1 on the wire; deferred, and escalated to told=0 at the defer cap"


class Zero(Miss):
    name = "zero"
    ref = "#797c, before sgl-project#944"
    about = "read as local = 0, a measurement nobody made"
    reports_unresolved = False

    def read(self, local: int) -> int:
        return 0 if local == UNRESOLVED else local
