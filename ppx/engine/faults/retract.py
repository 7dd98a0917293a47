"""faults.retract_rid: rank 0 retracts a rid rank-locally after sealing the row that names it
(boot weg1b7, sgl-project#1180: PP0's `#888b` relief actuator retracted c25108f3 one
scheduling iteration after its row was sealed).

When request `retract_rid`'s first token comes back, rank 0 requeues it on its own queue
(tokens kept; the relief: its seat is given up) and announces the retraction on its next
chain (flag RETRACT, the rid in the chain header's own `retract_rid` field). A follower that
reads the announcement lets the rid go (its queue, continuation and running batch no longer hold it: the log's follower could
not locate it). Rank 0 re-admits the rid from its queue at once, so its next row names a rid
no follower can locate -- the log's second measured shape, a resident re-admitted
rank-locally (`#968 READMIT CACHED`). With `faults.retract_redeliver=true` the chain hop
after the announcement carries the rid again (a late hop: what the row probe's hedge waits
for), so a follower that waits for it can run the row.
"""

from __future__ import annotations

from ppx.core import Flag, Kind, Message, Req
from ppx.header import declare, pack

# the chain header's word that names the retracted rid (ppx/header.py)
RETRACT_RID = declare(Kind.CHAIN, "retract_rid", "faults.retract_rid")


class NoRetract:
    def after_output(self, sched, done: list[tuple[Req, int]]) -> None:
        pass

    def chain_out(self, reqs: list[Req], flags: int) -> tuple[list[Req], int, tuple[int, ...]]:
        return reqs, flags, ()

    def chain_in(self, sched, msg: Message) -> None:
        pass


class RetractRid(NoRetract):
    def __init__(self, rid: int, redeliver: bool, first: bool) -> None:
        self.rid, self.redeliver, self.first = rid, redeliver, first
        self.req: Req | None = None
        self.state = "armed"  # -> announce -> (redeliver) -> done

    def after_output(self, sched, done: list[tuple[Req, int]]) -> None:
        """Rank 0: the rid's first token is in; the relief retracts it here only."""
        if not self.first:
            return
        for req, _ in done:
            if req.rid == self.rid and self.state == "armed" and not req.finished:
                sched.requeue(req)  # rank-local: nobody else is told until the next chain
                self.req, self.state = req, "announce"

    def chain_out(self, reqs: list[Req], flags: int) -> tuple[list[Req], int, tuple[int, ...]]:
        if self.state == "announce":
            self.state = "redeliver" if self.redeliver else "done"
            return reqs, flags | Flag.RETRACT, pack(Kind.CHAIN, retract_rid=self.rid)
        if self.state == "redeliver":
            self.state = "done"
            # the rid travels again as a request whose prompt is everything it holds so far
            # (rank 0 adds nothing: it knows the rid)
            again = Req(self.rid, list(self.req.tokens), self.req.remaining_new)
            return [*reqs, again], flags, ()
        return reqs, flags, ()

    def chain_in(self, sched, msg: Message) -> None:
        """A follower: rank 0 retracted the rid; it leaves this rank."""
        if msg.flags & Flag.RETRACT:
            sched.drop(RETRACT_RID.of(msg))


def retract_fault(cfg, rank: int) -> NoRetract:
    rid = int(cfg.faults.retract_rid)
    if rid < 0:
        return NoRetract()
    return RetractRid(rid, bool(cfg.faults.retract_redeliver), rank == 0)
