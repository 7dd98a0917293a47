"""Conservation and progress, checked by the rank itself between passes.

Every request a rank took in (from the frontend on rank 0, from the chain on a follower) is
held somewhere on that rank -- the waiting queue, a slot's running batch, a continuation cell
or the chunked pointer, a pass in flight, a resident no cell names -- until its last token is
applied (or a retraction fault drops it). A bug that forgets one leaves every task runnable:
no cycle for the watchdog, no voided pass for the livelock bound; the run would spin until a
budget ends it as `timeout`, minutes later, naming nothing. So each pass the rank compares
its ledger of requests taken in with what its scheduler holds, and a request held nowhere
ends the run at once as `lost`, naming where it was last seen.

Order: a request a void or a cutover re-queued goes back to the head of the waiting queue,
ahead of every request never admitted, so it is the next one offered. Re-queued behind newer
arrivals it is served all the same, later, and only its latency shows it; under steady
arrivals it may wait for good. So the same check ends a run whose queue holds a re-queued
request behind a fresh one (`queue order: ...`, verdict `stopped`).

Progress is tokens: rank 0 counts passes in which requests are outstanding and no token is
committed; past `engine.liveness.stall_passes` the run ends `stalled` (bounded in passes, the same on
gloo and on the simulator, never in scheduler steps). A livelock of voids ends first, by its
own bound, with its own reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ppx.core import Req


class Holder(Protocol):
    """What the check reads of a rank's scheduler."""

    waiting: Iterable[Req]

    def places(self) -> dict[int, str]: ...


LOST, STALLED = "lost: ", "stalled: "  # the reasons' prefixes, read by core.stop_verdict
ORDER = "queue order: "


def queue_order(waiting: Iterable[Req]) -> str | None:
    """None, or the first re-queued request (admitted before: admit_seq > 0) that waits
    behind one never admitted."""
    fresh = None
    for req in waiting:
        if req.admit_seq == 0:
            fresh = fresh or req
        elif fresh is not None:
            return (
                f"{ORDER}rid {req.rid} was re-queued behind rid {fresh.rid}, never admitted: "
                "a re-queued request goes back to the head of the queue"
            )
    return None


class Conservation:
    def __init__(self, rank: int, stall_passes: int) -> None:
        self.rank, self.stall_passes = rank, stall_passes
        self.seen: dict[int, tuple[str, int]] = {}  # rid -> (where it was held, pass)
        self.last_commit = 0  # the last pass that committed a token (or had nothing to do)
        self.fresh = False  # a token was committed since the last check

    def took(self, rid: int, how: str) -> None:
        if rid not in self.seen:
            self.seen[rid] = (how, -1)

    def left(self, rid: int) -> None:
        """Its last token was applied, or a retraction fault dropped it from this rank."""
        self.seen.pop(rid, None)

    def committed(self) -> None:
        self.fresh = True

    def check(self, sched: Holder, pass_id: int) -> str | None:
        """None, or the reason the run ends (`lost: ...` / `stalled: ...`)."""
        if self.fresh or not self.seen:  # a token committed, or nothing outstanding
            self.fresh = False
            self.last_commit = pass_id
        if not self.seen:
            return None
        held = sched.places()
        for rid, (where, at) in self.seen.items():
            now = held.get(rid)
            if now is None:
                since = f"at pass {at}" if at >= 0 else f"in pass {pass_id}"
                return (
                    f"{LOST}rid {rid} left {where} {since} and is held nowhere on rank "
                    f"{self.rank} (pass {pass_id}; outstanding {sorted(self.seen)})"
                )
            self.seen[rid] = (now, pass_id)
        if (order := queue_order(sched.waiting)) is not None:
            return f"{order} (rank {self.rank}, pass {pass_id})"
        idle = pass_id - self.last_commit
        if self.rank == 0 and self.stall_passes > 0 and idle > self.stall_passes:
            rids = sorted(self.seen)
            held_at = {rid: self.seen[rid][0] for rid in rids[:4]}
            return (
                f"{STALLED}{len(rids)} requests outstanding {rids[:8]}, no token committed "
                f"for {idle} passes (engine.liveness.stall_passes={self.stall_passes}), ranks "
                f"still running passes (no cycle); held at {held_at}"
            )
        return None
