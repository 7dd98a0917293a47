"""`decision`, `forwarded` and `row_authority`: rank 0 decides, followers obey (or say why they
cannot).

Rank 0 forms the batch from its own queue and tree (clamped by the guard) and puts the
decision on its own channel every pass: membership and lengths, never slot pointers. A
follower (`follow.Follower`, its own collaborator) forms its batch from the decision or reports
the rids it cannot run; what it does then (retract and void, refuse and stop) is the designs'
(ppx/protocol). The voids and laps that come back are the return path's (returns.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.core import Flag, Kind, Message, SlotBatch
from ppx.engine.admission import codec
from ppx.engine.admission.base import Admission
from ppx.engine.admission.follow import Follower
from ppx.engine.admission.probe import RowProbeStep
from ppx.header import DECISION_CHECKSUM, DECISION_COUNT, DECISION_MODE, pack
from ppx.protocol import prefetch_floor as pf
from ppx.protocol.policy import Policy as PolicyDesign
from ppx.protocol.prefetch_carrier import FLOOR_QUERY, query_code, read_query
from ppx.protocol.row_probe import RowProbe

if TYPE_CHECKING:
    from ppx.engine.admission.decision_parts import DecisionParts
    from ppx.engine.admission.prefill import LocalPrefill
    from ppx.engine.context import RankContext
    from ppx.engine.loop import PassState
    from ppx.protocol.registry import Protocol


class DecisionAdmission(Admission):
    def __init__(
        self, ctx: RankContext, proto: Protocol, prefill: LocalPrefill, parts: DecisionParts
    ) -> None:
        super().__init__(ctx, prefill)
        self.parts = parts
        self.name = proto.of(PolicyDesign).name
        self.follower = Follower(ctx, proto, parts.n)
        self.probe = RowProbeStep(ctx, proto.of(RowProbe))  # a row naming an unknown rid
        # rank 0 admits against the smallest pool (the cache's `slack`, set by the rank's
        # plan), so a follower never lacks room for what it is told

    def schedule(self, p: PassState) -> None:
        ctx = self.ctx
        ctx.sched.snapshot_chunked(p.slot)
        if not ctx.is_first:
            if p.decision is not None:
                self.follower.apply(p)
            return
        p.batch = b = self.prefill.form(p.slot, p.pass_id)
        load_back = self.parts.load_back
        if b is not None:
            load_back.published(b.rids)  # rank 0's own row, parked for the lap
        if (why := load_back.starved(ctx.sched)) is not None:
            ctx.stop(why, p)
        p.decision = self.decision_of(p, b)

    def decision_of(self, p: PassState, b: SlotBatch | None) -> Message:
        mode = codec.MODES[b.mode] if b is not None else codec.MODES["none"]
        # only a prefill decision carries entries; a decode pass's membership is the slot's
        # running set on every rank, so it travels as a count and a checksum in the header
        # (the message still exists every pass)
        rids = b.rids if b is not None else []
        prefill = b is not None and mode == codec.MODES["prefill"]
        msg = Message(
            Kind.DECISION,
            p.slot,
            p.pass_id,
            self.ctx.epoch,
            aux=pack(Kind.DECISION, mode=mode, count=len(rids), checksum=sum(rids) & 0x7FFFFFFF),
            flags=Flag.HAS_ENTRIES if prefill else 0,
            tensors=[codec.encode(b.entries)] if b is not None and prefill else [],
        )
        carrier = self.parts.carrier
        if carrier is not None:  # #1175: ask about one deferred rid (round robin)
            q = carrier.query(p.pass_id)
            # with nothing in flight no output receive reads the wire from the last rank:
            # rank 0 owes a blocking read of this pass's lap, and says so on the decision
            idle = b is None and all(x is None for x in self.ctx.sched.inflight)
            msg.aux = pack(
                Kind.DECISION,
                mode=DECISION_MODE.of(msg),
                count=DECISION_COUNT.of(msg),
                checksum=DECISION_CHECKSUM.of(msg),
                floor_query=query_code(q, q >= 0 and idle),
            )
            carrier.owe = p.pass_id if q >= 0 and idle else -1
        return msg

    def send_decision(self, p: PassState) -> None:
        ctx = self.ctx
        if ctx.is_last or p.decision is None:
            return
        # followers forward the decision before acting on it: nobody downstream waits on us
        ctx.ch.send(ctx.next, p.decision)

    def recv_decision(self, p: PassState) -> None:
        ctx, carrier = self.ctx, self.parts.carrier
        if ctx.is_first:
            return
        p.decision = decision = ctx.ch.recv(ctx.prev, Kind.DECISION, p.slot, p.pass_id)
        if decision.pass_id != p.pass_id:
            ctx.stop(
                f"decision for pass {decision.pass_id} arrived at rank{ctx.rank} pass {p.pass_id}",
                p,
            )
        self.probe.hold_until_locatable(p)  # sgl-project#1180: before anything reads the row
        entries, carried = bool(decision.flags & Flag.HAS_ENTRIES), False
        if carrier is not None:  # stamp on the way up (#1175), before anything is applied
            rid, owed = read_query(FLOOR_QUERY.of(decision))
            rows = carrier.stamp(ctx.sched, rid) if rid >= 0 else []
            p.decision = decision = pf.stamped(decision, rows, entries)
            # a lap rank 0 will read: before an output it receives, or one it said it owes
            carried = rid >= 0 and (DECISION_MODE.of(decision) != codec.MODES["none"] or owed)
        if ctx.is_last and (entries or carried) and ctx.world > 1:
            # the return trip: the decision's echo wraps back to rank 0 (the lap)
            aux = (
                pf.lap_aux(decision, carrier, entries)
                if carrier is not None
                else (DECISION_COUNT.of(decision),)
            )
            ctx.ch.send(0, Message(Kind.LAP, p.slot, p.pass_id, ctx.epoch, aux=aux))
        if p.scheduled:
            self.follower.apply(p)

    def on_served(self, rid: int) -> None:
        parts = self.parts
        parts.guard.served(rid)
        parts.offer.served(rid)
        parts.told_rows.drop(rid)

    def counters(self) -> dict[str, int]:
        return self.parts.counters()
