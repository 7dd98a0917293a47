"""`decision` and `forwarded`: rank 0 decides, followers obey (or say why they cannot).

Rank 0 forms the batch from its own queue and tree (clamped by the guard) and puts the
decision on its own channel every pass: membership and lengths, never slot pointers.
`decision`: a follower with local >= told truncates to told; local < told retracts the entry
(one warning naming rank / rid / told / local) and the pass is voided group-uniformly.
`forwarded`: the follower executes (prefix_len, extend_len) exactly, re-deriving nothing; a
schedule it cannot execute is a refusal, answered by `on_refusal: void | stop`.
"""

from __future__ import annotations

import sys

from ppx.core import Flag, Kind, Message, Req, SlotBatch
from ppx.engine.admission import codec
from ppx.engine.admission import prefetch_floor as pf
from ppx.engine.admission.base import Policy
from ppx.engine.admission.follow import Follower
from ppx.engine.admission.load_back import LoadBackGate
from ppx.engine.admission.reconcile import Reconciler
from ppx.engine.admission.told_rows import ToldRows
from ppx.engine.board import F
from ppx.engine.guard import Guard


class DecisionPolicy(Follower, Policy):
    def __init__(self, ctx, forwarded: bool) -> None:
        super().__init__(ctx)
        cfg = ctx.cfg
        self.name = "forwarded" if forwarded else "decision"
        self.forwarded = forwarded
        self.on_refusal = cfg.engine.admission.on_refusal
        g = cfg.engine.guard
        self.guard = Guard(
            g.name,
            int(g.defer_cap),
            miss=getattr(g, "miss", "sentinel"),
            prefix_clear=getattr(g, "prefix_clear", "serve"),
            defer_streak=getattr(g, "defer_streak", "refusal"),
            on_escalate=self.escalate,
        )
        self.livelock_passes = int(cfg.engine.livelock_passes)
        # engine.admission.geometry: told (execute rank 0's lengths) | rederive (#791 slice 1)
        self.rederive = getattr(cfg.engine.admission, "geometry", "told") == "rederive"
        self.told_rows = ToldRows(
            getattr(cfg.engine.admission, "told_scope", "pass"),
            getattr(getattr(cfg, "flip", None), "epoch_advance", "release"),
        )
        ctx.sched.on_requeue = self.told_rows.retracted  # the plan carries it across flips
        a = cfg.engine.admission  # reconcile: slot | scheduler; void: requeue | keep (#798)
        self.rec = Reconciler(
            getattr(a, "reconcile", "slot"),
            getattr(a, "void", "requeue"),
            getattr(a, "local_extent", "planned"),  # planned | completed (the stagger)
        )
        # engine.kv.load_back: local (#1046) | admitted (#1040: a load needs a published extent)
        kv = getattr(cfg.engine, "kv", None)
        self.load_back = LoadBackGate(getattr(kv, "load_back", "local"), self.livelock_passes)
        # a follower's prefill in rank 0's decision order (default) or its own queue's order
        self.queue_order = getattr(a, "batch_order", "decision") == "queue"
        self.void_streak: list[tuple[int, int, int]] = []
        # engine.admission.prefetch_floor=group (#1175): the per-rid completion carrier
        self.carrier = pf.carrier_for(ctx, forwarded)
        self.laps = 0
        self.n = {"retractions": 0, "refusals": 0, "voids": 0, "stops": 0, "seat_vetoes": 0}
        # engine.admission.follower_seats=veto: a follower's own seat count refuses rids of a
        # forwarded schedule (the count gates #1153 F2 removed); ignore (default) never does
        self.seat_veto = forwarded and getattr(a, "follower_seats", "ignore") == "veto"
        self.seat_note = ""  # the numbers of the last veto, for a stop's reason
        # faults.offer_flap (rank 0): rids whose match is read `flap` tokens short this offer
        self.flap = int(getattr(getattr(cfg, "faults", None), "offer_flap", 0))
        self.flapped: set[int] = set()
        # rank 0 admits against the smallest pool (the cache's `slack`, set by the rank's
        # plan), so a follower never lacks room for what it is told

    # -- rank 0 ---------------------------------------------------------------------------
    def clamp(self, req, local: int) -> int | None:
        want = self.guard.clamp(req.rid, req.tokens, local)
        if want is None or self.carrier is None or self.ctx.plan.phase != "pp":
            return want
        return pf.admit_on_floor(self.ctx, self.carrier, req.rid, want)  # #1175

    def local_match(self, req) -> int:
        may = self.load_back.may_load(req.rid)
        local = self.sched.cache.match(req.tokens, may_load=may)
        self.load_back.deferred += local < 0 and not may
        if req.rid in self.flapped and local > self.flap:
            return local - self.flap  # faults.offer_flap: the extension is gone this offer
        return local

    def schedule(self, p) -> None:
        self.rec.snapshot(self.sched, p.slot)
        if self.ctx.is_first:
            p.batch = self.local_prefill(p.slot, p.pass_id)
            b = p.batch
            if b is not None:
                self.load_back.published(b.rids)  # rank 0's own row, parked for the lap
            if (why := self.load_back.starved(self.sched)) is not None:
                self.ctx.stop(why, p)
            mode = codec.MODES[b.mode] if b is not None else codec.MODES["none"]
            # only a prefill decision carries entries; a decode pass's membership is the
            # slot's running set on every rank, so it travels as a count and a checksum
            # in the header (the message still exists every pass)
            rids = b.rids if b is not None else []
            p.decision = Message(
                Kind.DECISION,
                p.slot,
                p.pass_id,
                self.ctx.epoch,
                aux=(mode, len(rids), sum(rids) & 0x7FFFFFFF),
                flags=Flag.HAS_ENTRIES if mode == codec.MODES["prefill"] else 0,
                tensors=[codec.encode(b.entries)] if mode == codec.MODES["prefill"] else [],
            )
            if self.carrier is not None:  # #1175: ask about one deferred rid (round robin)
                q = self.carrier.query(p.pass_id)
                # with nothing in flight no output receive reads the wire from the last rank:
                # rank 0 owes a blocking read of this pass's lap, and says so on the decision
                idle = b is None and all(x is None for x in self.sched.inflight)
                p.decision.aux = (*p.decision.aux, pf.query_code(q, q >= 0 and idle))
                self.carrier.owe = p.pass_id if q >= 0 and idle else -1
        elif p.decision is not None:
            self.apply(p)

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
        entries, carried = bool(p.decision.flags & Flag.HAS_ENTRIES), False
        if self.carrier is not None:  # stamp on the way up (#1175), before anything is applied
            rid, owed = pf.read_query(p.decision.aux[3])
            rows = self.carrier.stamp(self.sched, rid) if rid >= 0 else []
            p.decision = pf.stamped(p.decision, rows, entries)
            # a lap rank 0 will read: before an output it receives, or one it said it owes
            carried = rid >= 0 and (p.decision.aux[0] != codec.MODES["none"] or owed)
        if ctx.is_last and (entries or carried) and ctx.world > 1:
            # the return trip: the decision's echo wraps back to rank 0 (the lap)
            ctx.ch.send(
                0,
                Message(
                    Kind.LAP,
                    p.slot,
                    p.pass_id,
                    ctx.epoch,
                    aux=pf.lap_aux(p.decision, self.carrier, entries)
                    if self.carrier is not None
                    else (p.decision.aux[1],),
                ),
            )
        if p.scheduled:
            self.apply(p)

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
        if self.carrier is not None:
            self.carrier.absorb(msg.aux)

    # -- the output ring: voids -----------------------------------------------------------
    def absorb(self, slot: int, batch: SlotBatch, msg, p) -> bool:
        ctx = self.ctx
        if not msg.flags & Flag.VOID:
            if ctx.is_first and msg.tensors and msg.tensors[0].numel():
                self.void_streak.clear()
            if ctx.is_first and batch.mode == "prefill":
                # every rank computed these prompts: a floor over them is stale (#963)
                for e in batch.entries:
                    req = self.sched.reqs.get(e.rid)
                    if req is not None:
                        self.guard.prefix_served(req.tokens[: e.end])
            return False
        obs = msg.tensors[1].tolist() if len(msg.tensors) > 1 else []
        if ctx.is_first:  # the guard learns before the requests are re-offered
            for _rank, rid, told, local in obs:
                req = self.sched.reqs.get(rid)
                self.guard.learn(rid, req.tokens if req else [], told, local)
            if self.flap > 0:  # faults.offer_flap: each void toggles the match (once per rid)
                self.flapped ^= {row[1] for row in obs}
        requeued = self.rec.void(self.sched, batch)
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
            self.count_void(tuple(obs[0][1:]) if obs else (-1, -1, -1), "", p)
        return True

    def absorb_tp_void(self, obs: list[list[int]], pass_id: int) -> None:
        self.n["voids"] += 1
        if self.ctx.is_first:
            for rid, told, local in obs:
                req = self.sched.reqs.get(rid)
                self.guard.learn(rid, req.tokens if req else [], told, local)
            self.count_void(tuple(obs[0]), " (TP phase)", None)

    def count_void(self, key: tuple, where: str, p) -> None:
        """Rank 0: a voided pass with no token served since the last one; the bound ends a
        run that only voids (sgl-project#630), naming what repeats."""
        self.void_streak.append(key)
        if len(self.void_streak) >= self.livelock_passes:
            pairs = sorted(set(self.void_streak))[:4]
            self.ctx.stop(
                f"livelock: {len(self.void_streak)} consecutive voided passes with no token "
                f"served{where}; (rid, told, local) repeating: {pairs}",
                p,
            )

    def escalate(self, rid: int, reports: int) -> None:
        """The defer cap ran out for `rid`: its next offer is told=0 (sgl-project#944)."""
        msg = (
            f"escalation rid={rid}: {reports} unresolved reports > "
            f"engine.guard.defer_cap={self.guard.defer_cap}; next told=0"
        )
        print(f"ppx warning: {msg}", file=sys.stderr)
        self.ctx.events.emit("escalation", -1, -1, rid, self.ctx.epoch, msg)

    def check_told_row(self, rid: int, local: int, told: int) -> None:
        self.told_rows.check(self.ctx, rid, local, told)

    def readmit_told_row(self, req: Req) -> None:
        # the tree match only for a request that carries a row: the new tree holds what it
        # holds (nothing, unless a host tier loads it back)
        if req.rid in self.told_rows.rows:
            local = self.ctx.sched.cache.tree_match(req.tokens)
            self.told_rows.readmit(self.ctx, req.rid, local)

    def on_served(self, rid: int) -> None:
        self.guard.served(rid)
        self.flapped.discard(rid)
        self.told_rows.drop(rid)

    def counters(self) -> dict:
        return {
            **self.n,
            **self.rec.counters(),
            **self.load_back.counters(),
            **(self.carrier.n if self.carrier is not None else {}),
            **(self.guard.counters() if self.ctx.is_first else self.told_rows.counters()),
        }
