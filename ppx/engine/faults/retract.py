"""faults.retract (hook `Carry`): rank 0 retracts request `rid` rank-locally after sealing the
row that names it (boot weg1b7, sgl-project#1180: PP0's `#888b` relief actuator retracted
c25108f3 one scheduling iteration after its row was sealed).

When the request's first token comes back, rank 0 requeues it on its own queue (tokens kept;
the relief: its seat is given up) and announces the retraction on its next chain (flag
RETRACT, the rid in the chain header's own `retract_rid` field). A follower that reads the
announcement lets the rid go (its queue, continuation and running batch no longer hold it:
the log's follower could not locate it). Rank 0 re-admits the rid from its queue at once, so
its next row names a rid no follower can locate -- the log's second measured shape, a
resident re-admitted rank-locally (`#968 READMIT CACHED`). With `faults.retract.redeliver`
the chain hop after the announcement carries the rid again (a late hop: what the row probe's
hedge waits for), so a follower that waits for it can run the row.
"""

from __future__ import annotations

from typing import Any

from ppx.core import Flag, Kind, Message, Req
from ppx.engine.faults.base import Carry, Fault
from ppx.fault_sections import OFF
from ppx.header import declare, pack
from ppx.protocol.policy import policy_of

# the chain header's word that names the retracted rid (ppx/header.py)
RETRACT_RID = declare(Kind.CHAIN, "retract_rid", "faults.retract")


class Retract(Fault, Carry):
    key = "retract"

    def __init__(self, section: Any, cfg: Any, rank: int) -> None:
        super().__init__(section, cfg, rank)
        self.rid, self.redeliver = int(section.rid), bool(section.redeliver)
        self.req: Req | None = None
        self.state = "armed"  # -> announce -> (redeliver) -> done

    @classmethod
    def on(cls, section: Any) -> bool:
        return int(section.rid) != OFF

    @classmethod
    def refuse(cls, section: Any, cfg: Any) -> str | None:
        rid = int(section.rid)  # rank 0 retracts what its row named: a row must travel
        if rid < 0:
            return (
                "faults.retract.redeliver=true means nothing without faults.retract.rid"
                if section.redeliver
                else None
            )
        if not policy_of(cfg).decides or int(cfg.pp) < 2:
            return (
                f"faults.retract.rid={rid}: a row naming a retracted rid needs rank 0's "
                f"decision on the wire (engine/admission=decision, forwarded or row_authority) "
                f"and pp >= 2"
            )
        if cfg.flip.enabled:
            # the fault is rank 0's PP-phase row probe (#1180); a TP-phase follower holds no
            # row probe, meets the retracted rid in its broadcast batch and crashed (ValueError
            # in admit_entry, KeyError in the TP pass: found by the scenario explorer)
            return (
                f"faults.retract.rid={rid} with flips: the retraction fault is modelled in the "
                f"PP phase only (the TP phase has no row probe to meet it); use flip=off"
            )
        return None

    def after_output(self, sched: Any, done: list[tuple[Req, int]]) -> None:
        """Rank 0: the rid's first token is in; the relief retracts it here only."""
        if self.rank != 0:
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
            assert self.req is not None, "announced: the output that retracted it set it"
            # the rid travels again as a request whose prompt is everything it holds so far
            # (rank 0 adds nothing: it knows the rid)
            again = Req(self.rid, list(self.req.tokens), self.req.remaining_new)
            return [*reqs, again], flags, ()
        return reqs, flags, ()

    def chain_in(self, sched: Any, msg: Message) -> None:
        """A follower: rank 0 retracted the rid; it leaves this rank."""
        if msg.flags & Flag.RETRACT:
            sched.drop(RETRACT_RID.of(msg))
