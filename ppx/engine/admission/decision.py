"""`decision`, `forwarded` and `row_authority`: rank 0 decides, followers obey (or say why they
cannot).

Rank 0 forms the batch from its own queue and tree (clamped by the guard) and puts the
decision on its own channel every pass: membership and lengths, never slot pointers. A
follower (`follow.Follower`, its own collaborator) forms its batch from the decision or reports
the rids it cannot run; what it does then (retract and void, refuse and stop) is the designs'
(ppx/protocol). Rank 0 absorbs the voids that come back on the output ring and the laps.
"""

from __future__ import annotations

import sys

from ppx.core import POOL_SHORT, Flag, Kind, Message, Req, SlotBatch
from ppx.engine.admission import codec
from ppx.engine.admission.base import Policy
from ppx.engine.admission.follow import Follower
from ppx.engine.admission.probe import RowProbeStep
from ppx.engine.board import F
from ppx.engine.faults.offer import offer_fault
from ppx.protocol import prefetch_floor as pf
from ppx.protocol.guard.defer_streak import DeferStreak
from ppx.protocol.guard.floors import Floors
from ppx.protocol.guard.guard import Guard
from ppx.protocol.guard.prefix_clear import PrefixClear
from ppx.protocol.guard.unit import GuardUnit
from ppx.protocol.load_back import LoadBack
from ppx.protocol.policy import Policy as PolicyDesign
from ppx.protocol.prefetch_carrier import query_code, read_query
from ppx.protocol.prefetch_floor import PrefetchFloor
from ppx.protocol.prefetch_short import PrefetchShort
from ppx.protocol.reconcile import Reconcile
from ppx.protocol.registry import Protocol
from ppx.protocol.row_probe import RowProbe
from ppx.protocol.told_scope import ToldScope
from ppx.protocol.void import VoidMode


class DecisionPolicy(Policy):
    def __init__(self, ctx, proto: Protocol) -> None:
        super().__init__(ctx)
        cfg = ctx.cfg
        self.design = proto.of(PolicyDesign)
        self.name = self.design.name
        self.guard = Guard(
            proto.of(Floors),
            proto.of(DeferStreak),
            proto.of(PrefixClear),
            int(cfg.engine.guard.defer_cap),
            on_escalate=self.escalate,
            unit=proto.of(GuardUnit),
        )
        self.lookup = proto.of(Reconcile)  # where a follower looks for a rid (the escalation)
        self.livelock_passes = int(cfg.engine.livelock_passes)
        self.told_rows = proto.of(ToldScope)
        self.voids = proto.of(VoidMode)
        self.load_back = proto.of(LoadBack)
        self.void_streak: list[tuple[int, int, int]] = []
        self.void_slots: list[int] = []  # the slot of each voided pass in the streak (#798)
        # engine.admission.prefetch_floor=group (#1175): the per-rid completion carrier
        self.floor = proto.of(PrefetchFloor)
        self.carrier = self.floor.carrier(ctx.rank, ctx.world, self.design.executes)
        if self.carrier is not None:  # a floor that completed short: clamp, or wait the bound
            self.carrier.short_defers = proto.of(PrefetchShort).defers
        self.laps = 0
        self.n = {"retractions": 0, "refusals": 0, "voids": 0, "stops": 0}
        self.follower = Follower(ctx, proto, self.n)
        self.probe = RowProbeStep(ctx, proto.of(RowProbe))  # a row naming an unknown rid
        self.offer = offer_fault(cfg, ctx.rank)  # faults.offer_flap (rank 0 only), else inert
        # rank 0 admits against the smallest pool (the cache's `slack`, set by the rank's
        # plan), so a follower never lacks room for what it is told

    # -- rank 0 ---------------------------------------------------------------------------
    def clamp(self, req, local: int) -> int | None:
        want = self.guard.clamp(req.rid, req.tokens, local)
        if want is None or not self.floor_here():
            return want
        return pf.admit_on_floor(self.ctx, self.carrier, req.rid, want)  # #1175

    def floor_here(self) -> bool:
        """Does the group floor govern this phase's admissions? (group_pp: the PP phase only)"""
        return self.carrier is not None and (self.ctx.phase == "pp" or self.floor.in_tp_phase)

    # -- the floor in the TP phase (#1175): asked in the header, answered on an all-reduce ---
    def floor_query(self, pass_id: int) -> int:
        return self.carrier.query(pass_id) if self.floor_here() else -1

    def floor_rows(self, rid: int):
        return pf.tp_row(self.carrier, self.sched, rid, self.ctx.world)

    def floor_absorb(self, rid: int, rows) -> None:
        pf.tp_absorb(self.carrier, rid, rows)

    def at_cutover(self) -> None:
        if self.carrier is not None:  # the layout and the host tier change (a false #1176)
            self.carrier.reset()

    def local_match(self, req) -> int:
        return self.offer.read(req.rid, self.load_back.match(self.sched.cache, req))

    def schedule(self, p) -> None:
        self.sched.snapshot_chunked(p.slot)
        if not self.ctx.is_first:
            if p.decision is not None:
                self.follower.apply(p)
            return
        p.batch = b = self.local_prefill(p.slot, p.pass_id)
        if b is not None:
            self.load_back.published(b.rids)  # rank 0's own row, parked for the lap
        if (why := self.load_back.starved(self.sched)) is not None:
            self.ctx.stop(why, p)
        p.decision = self.decision_of(p, b)

    def decision_of(self, p, b: SlotBatch | None) -> Message:
        mode = codec.MODES[b.mode] if b is not None else codec.MODES["none"]
        # only a prefill decision carries entries; a decode pass's membership is the slot's
        # running set on every rank, so it travels as a count and a checksum in the header
        # (the message still exists every pass)
        rids = b.rids if b is not None else []
        prefill = mode == codec.MODES["prefill"]
        msg = Message(
            Kind.DECISION,
            p.slot,
            p.pass_id,
            self.ctx.epoch,
            aux=(mode, len(rids), sum(rids) & 0x7FFFFFFF),
            flags=Flag.HAS_ENTRIES if prefill else 0,
            tensors=[codec.encode(b.entries)] if prefill else [],
        )
        if self.carrier is not None:  # #1175: ask about one deferred rid (round robin)
            q = self.carrier.query(p.pass_id)
            # with nothing in flight no output receive reads the wire from the last rank:
            # rank 0 owes a blocking read of this pass's lap, and says so on the decision
            idle = b is None and all(x is None for x in self.sched.inflight)
            msg.aux = (*msg.aux, query_code(q, q >= 0 and idle))
            self.carrier.owe = p.pass_id if q >= 0 and idle else -1
        return msg

    def send_decision(self, p) -> None:
        ctx = self.ctx
        if ctx.is_last or p.decision is None:
            return
        # followers forward the decision before acting on it: nobody downstream waits on us
        ctx.ch.send(ctx.next, p.decision)

    def recv_decision(self, p) -> None:
        ctx = self.ctx
        if ctx.is_first:
            return
        p.decision = ctx.ch.recv(ctx.prev, Kind.DECISION, p.slot, p.pass_id)
        if p.decision.pass_id != p.pass_id:
            ctx.stop(
                f"decision for pass {p.decision.pass_id} arrived at rank{ctx.rank} pass {p.pass_id}",
                p,
            )
        self.probe.hold_until_locatable(p)  # sgl-project#1180: before anything reads the row
        entries, carried = bool(p.decision.flags & Flag.HAS_ENTRIES), False
        if self.carrier is not None:  # stamp on the way up (#1175), before anything is applied
            rid, owed = read_query(p.decision.aux[3])
            rows = self.carrier.stamp(self.sched, rid) if rid >= 0 else []
            p.decision = pf.stamped(p.decision, rows, entries)
            # a lap rank 0 will read: before an output it receives, or one it said it owes
            carried = rid >= 0 and (p.decision.aux[0] != codec.MODES["none"] or owed)
        if ctx.is_last and (entries or carried) and ctx.world > 1:
            # the return trip: the decision's echo wraps back to rank 0 (the lap)
            aux = (
                pf.lap_aux(p.decision, self.carrier, entries)
                if self.carrier is not None
                else (p.decision.aux[1],)
            )
            ctx.ch.send(0, Message(Kind.LAP, p.slot, p.pass_id, ctx.epoch, aux=aux))
        if p.scheduled:
            self.follower.apply(p)

    def lap(self, p, block: bool) -> None:
        """Rank 0 absorbs the laps that came back. Blocking on this pass's lap (the wraparound
        before sgl-project#796) waits on the last rank, which waits on the decision rank 0 has
        not sent yet when the lap step comes first: every rank ends up receiving."""
        ctx = self.ctx
        if not ctx.is_first or ctx.world == 1:
            return
        if block:
            if p.decision is not None and p.decision.flags & Flag.HAS_ENTRIES:
                self.absorb_lap(ctx.ch.recv(ctx.world - 1, Kind.LAP, p.slot, p.pass_id))
        else:
            while (msg := ctx.ch.try_recv(ctx.world - 1, Kind.LAP)) is not None:
                self.absorb_lap(msg)
        if self.carrier is not None and self.carrier.owe == p.pass_id:
            # the lap this pass's decision said rank 0 owes (nothing in flight to read it)
            self.absorb_lap(ctx.ch.recv(ctx.world - 1, Kind.LAP, p.slot, p.pass_id))

    def absorb_lap(self, msg) -> None:
        self.laps += 1
        # a lap that left the last rank before a cutover carries numbers of the old layout
        # (the carrier was reset there): read late, it must not become the new layout's floor
        if self.carrier is not None and msg.epoch == self.ctx.epoch:
            self.carrier.absorb(msg.aux)

    # -- the output ring: voids -----------------------------------------------------------
    def absorb(self, slot: int, batch: SlotBatch, msg, p) -> bool:
        ctx = self.ctx
        if not msg.flags & Flag.VOID:
            if ctx.is_first and msg.tensors and msg.tensors[0].numel():
                self.void_streak.clear()
                self.void_slots.clear()
            if ctx.is_first and batch.mode == "prefill":
                # every rank computed these prompts: a floor over them is stale (#963)
                for e in batch.entries:
                    req = self.sched.reqs.get(e.rid)
                    if req is not None:
                        self.guard.prefix_served(req.tokens[: e.end])
            return False
        obs = msg.tensors[1].tolist() if len(msg.tensors) > 1 else []
        if ctx.is_first:  # the guard learns before the requests are re-offered
            self.guard.learn_void(obs, self.tokens_of)
            self.offer.voided({row[1] for row in obs})
            self.check_capacity(obs, p)
        requeued = self.voids.void(self.sched, batch, first=ctx.is_first)
        self.n["voids"] += 1
        ctx.board.add(F.VOIDS)
        ctx.events.emit(
            "void",
            p.pass_id,
            slot,
            obs[0][1] if obs else -1,
            ctx.epoch,
            f"pass {batch.pass_id} requeued {[r.rid for r in requeued]} obs {obs}",
        )
        if ctx.is_first:
            self.count_void(tuple(obs[0][1:]) if obs else (-1, -1, -1), "", p, batch.slot)
        return True

    def absorb_tp_void(self, obs: list[list[int]], pass_id: int) -> None:
        self.n["voids"] += 1
        if self.ctx.is_first:
            # the rows come in rank order from the all-reduced table; the rank itself is not
            # needed here, only the order (engine.guard.unit folds later rows of a rid)
            rows = [[i, *row] for i, row in enumerate(obs)]
            self.guard.learn_void(rows, self.tokens_of)
            self.check_capacity(rows, None)
            self.count_void(tuple(obs[0]), " (TP phase)", None, 0)

    def check_capacity(self, obs: list[list[int]], p) -> None:
        """Rank 0 admits against the smallest pool (the cache's `slack`, #1045), so a follower
        never lacks room for what it is told: a retraction row that says POOL_SHORT means
        rank 0's own accounting is wrong. It would be served anyway (the pass voids and is
        offered again), so it is a stop, named, not a silent slowdown."""
        for rank, rid, told, local in obs:
            if local == POOL_SHORT:
                self.ctx.stop(
                    f"pool short: rank{rank} could not hold rid {rid} told {told}, though "
                    "rank 0 admits against the smallest pool",
                    p,
                )

    def tokens_of(self, rid: int) -> list[int]:
        req = self.sched.reqs.get(rid)
        return req.tokens if req is not None else []

    def count_void(self, key: tuple, where: str, p, slot: int) -> None:
        """Rank 0: a voided pass with no token served since the last one; the bound ends a
        run that only voids (sgl-project#630), naming what repeats and in which slots (boot
        798's voids alternated slots 2, 0, 2, 0)."""
        self.void_streak.append(key)
        self.void_slots.append(slot)
        if len(self.void_streak) >= self.livelock_passes:
            pairs = sorted(set(self.void_streak))[:4]
            self.ctx.stop(
                f"livelock: {len(self.void_streak)} consecutive voided passes with no token "
                f"served{where}; (rid, told, local) repeating: {pairs}; voided slots (last 8): "
                f"{self.void_slots[-8:]}",
                p,
            )

    def count_retraction(self, n: int) -> None:
        self.n["retractions"] += n

    def escalate(self, rid: int, count: int) -> None:
        """The defer cap ran out for `rid`: its next offer is told=0 (sgl-project#944). Named
        once per rid, with where the followers looked for it: the rank that observes the
        miss is never the rank that acts on it, so the line must say what was searched."""
        unit = "reports" if self.guard.unit is None else self.guard.unit.name
        msg = (
            f"escalation rid={rid} (#944 UNRESOLVABLE): unresolved in {count} {unit}, "
            f"engine.guard.defer_cap={self.guard.defer_cap} reached; the followers looked in "
            f"the {self.lookup.where()}; next told=0"
        )
        print(f"ppx warning: {msg}", file=sys.stderr)
        self.ctx.events.emit("escalation", -1, -1, rid, self.ctx.epoch, msg)

    def check_told_row(self, rid: int, local: int, told: int) -> None:
        self.told_rows.check(self.ctx, rid, local, told)

    def readmit_told_row(self, req: Req) -> None:
        # the tree match only for a request that carries a row: the new tree holds what it
        # holds (nothing, unless a host tier loads it back)
        if self.told_rows.holds(req.rid):
            local = self.ctx.sched.cache.tree_match(req.tokens)
            self.told_rows.readmit(self.ctx, req.rid, local)

    def on_served(self, rid: int) -> None:
        self.guard.served(rid)
        self.offer.served(rid)
        self.told_rows.drop(rid)

    def counters(self) -> dict[str, int]:
        carried = self.carrier.n if self.carrier is not None else {}
        return {**self.n, **carried, **self.guard.counters()}
