"""A follower of a decision policy: form this rank's batch from rank 0's decision, or say by
name why it cannot (a retraction, a refusal, a stop).

`told` is rank 0's prefix_len; `local` is what this rank holds of the rid: its radix match for
a fresh admission, its extent of a continuation it holds (engine.admission.local_extent).
Mismatches are collected over the whole decision first, so the void (or stop) names every rid
this rank could not run. Which lookup answers "do I hold it?", how a miss is reported, where
the chunk lengths come from, the row order, a seat count, and what a refusal ends in: each is
a design the config chose (ppx/protocol), held here and called without comparing strings.
"""

from __future__ import annotations

import sys

from ppx.core import POOL_SHORT, SEATS_SHORT, UNRESOLVED, Entry, SlotBatch
from ppx.engine.admission import codec
from ppx.engine.board import F
from ppx.header import DECISION_CHECKSUM, DECISION_COUNT, DECISION_MODE
from ppx.protocol.batch_order import BatchOrder
from ppx.protocol.follower_seats import FollowerSeats
from ppx.protocol.geometry import Geometry
from ppx.protocol.guard.miss import Miss
from ppx.protocol.load_back import LoadBack
from ppx.protocol.local_extent import LocalExtent
from ppx.protocol.policy import Policy as PolicyDesign
from ppx.protocol.reconcile import Reconcile
from ppx.protocol.refusal import OnRefusal
from ppx.protocol.registry import Protocol
from ppx.protocol.retraction import Retraction
from ppx.protocol.told_scope import ToldScope
from ppx.protocol.void import VoidMode


class Follower:
    def __init__(self, ctx, proto: Protocol, tally: dict[str, int]) -> None:
        self.ctx, self.n = ctx, tally  # the policy's counters: retractions, refusals, stops
        design = proto.of(PolicyDesign)
        self.name, self.executes = design.name, design.executes
        self.stops = proto.of(OnRefusal).stops
        self.rec = proto.of(Reconcile)
        self.parks = proto.of(VoidMode).parks
        self.extent = proto.of(LocalExtent)
        self.told = proto.of(ToldScope)
        self.geometry = proto.of(Geometry)
        self.order = proto.of(BatchOrder)
        self.seats = proto.of(FollowerSeats)
        self.miss = proto.of(Miss)
        self.load_back = proto.of(LoadBack)
        self.retraction = proto.of(Retraction)

    def apply(self, p) -> None:
        """Form this follower's batch from the decision (after both the chain and the decision
        of this pass are in)."""
        ctx, s = self.ctx, self.ctx.sched
        mode = codec.MODE_NAMES[DECISION_MODE.of(p.decision)]
        if mode == "none":
            p.batch = None
            return
        if mode == "decode":
            entries = s.decode_entries(p.slot)
            n, checksum = DECISION_COUNT.of(p.decision), DECISION_CHECKSUM.of(p.decision)
            if (len(entries), sum(e.rid for e in entries) & 0x7FFFFFFF) != (n, checksum):
                ctx.stop(
                    f"decode membership: rank{ctx.rank} slot={p.slot} told {n} requests "
                    f"(rid sum {checksum}) but runs {sorted(e.rid for e in entries)}",
                    p,
                )
            p.batch = s.place(entries, p.slot, p.pass_id, "decode")
            return
        entries = codec.decode(p.decision.tensors[0])
        self.load_back.published(e.rid for e in entries)  # before this rank matches them
        obs = self.shortfalls(p, entries)
        obs += self.seats.veto(s, entries, ctx.rank, {row[1] for row in obs})
        if obs and (entries := self.retraction.settle(self, p, entries, obs)) is None:
            return  # retracted as a whole: voided (or stopped)
        excluded = list(obs)  # a partial retraction ran the rest: the proxy check asks (#791c)
        order = self.order.snapshot(s)  # before the admissions below leave the queue
        admitted, budget = [], s.chunk_size
        for e in entries:
            req = s.reqs[e.rid]
            if e.continues and req is not s.cont():
                self.rec.repoint(s, req)
            if not e.continues and s.holds_running(req):
                self.rec.rehome(s, req)  # a copy a void kept in this slot's running batch
            got = self.geometry.admit(s, req, e, budget, self.rec.held_chunked(s, req, self.parks))
            if got is None:
                # this rank's pool cannot hold what it is told (admissions earlier in this
                # same decision took the room): the same refusal as a missing prefix, never
                # an exception; a void rolls back what this pass admitted so far
                short = [[ctx.rank, e.rid, e.prefix_len, POOL_SHORT]]
                if self.retraction.settle(self, p, entries, short) is None:
                    return
                excluded += short
                continue
            admitted.append(got)
            budget -= got.extend_len
            if self.geometry.compares and (got.extend_len != e.extend_len or got.final != e.final):
                ctx.stop(
                    f"chunk geometry: rank{ctx.rank} rid {e.rid} told extend {e.extend_len} "
                    f"but would compute {got.extend_len}",
                    p,
                )
        p.batch = s.place(self.order.arrange(admitted, order), p.slot, p.pass_id, "prefill")
        if p.batch is not None:  # None: every entry excluded, nothing placed (#791's wedge)
            p.batch.excluded = excluded

    def shortfalls(self, p, entries: list[Entry]) -> list[list[int]]:
        """[rank, rid, told, local] for every entry this rank cannot run as told."""
        ctx, s = self.ctx, self.ctx.sched
        obs = []
        for e in entries:
            req = s.reqs.get(e.rid)
            if req is None:
                ctx.stop(
                    f"decision names rid {e.rid} unknown to rank{ctx.rank} (pass {p.pass_id})", p
                )
            held = self.rec.held_chunked(s, req, self.parks)
            missed = self.rec.missed(s, req, e, self.parks)
            if e.continues != held and not missed:
                # the continuation path obeys the decision too: a chunk that continues a
                # prefill this rank never started (or a fresh admission of what this rank has
                # mid-prefill) is a divergence, reported with what this rank holds
                obs.append([ctx.rank, e.rid, e.prefix_len, req.computed if held else 0])
                continue
            if not held:
                self.told.check(ctx, e.rid, s.cache.tree_match(req.tokens), e.prefix_len)
                self.told.stamp(e.rid, e.prefix_len, ctx.epoch)
            if missed:
                local = UNRESOLVED
            else:
                local = (
                    self.extent.held_extent(s, req) if held else self.load_back.match(s.cache, req)
                )
            if (
                local == UNRESOLVED
                and not missed
                and s.cache.tree_match(req.tokens) >= e.prefix_len
            ):
                local = s.cache.tree_match(req.tokens)  # a pending load does not matter here
            local = self.miss.read(local)
            # #944: a fresh told <= 0 demands no reuse, so no lookup result, not even a failed
            # one, makes it unhonourable (a miss answering 0 had this for free: 0 >= 0)
            zero = not e.continues and not held and e.prefix_len <= 0
            ok = zero or (
                local != UNRESOLVED and (local == e.prefix_len if held else local >= e.prefix_len)
            )
            if not ok:
                obs.append([ctx.rank, e.rid, e.prefix_len, local])
        return obs

    def stop_reason(self, p, entries: list[Entry], obs: list[list[int]]) -> str:
        """sgl-project#1153's STOP: what rank 0 told this rank and what it reached, sorted,
        comma-separated, no spaces (the literal the log's acceptance grep anchors on:
        `told=[a,b] reached=[a]`), then the numbers of every rid it could not execute."""
        told = sorted(e.rid for e in entries)
        refused = {row[1] for row in obs}
        reached = [rid for rid in told if rid not in refused]
        what = ", ".join(f"rid={rid} prefix_len={t} (local {loc})" for _r, rid, t, loc in obs)
        note = f"; {self.seats.note}" if obs[0][3] == SEATS_SHORT else ""
        return (
            f"{self.name} refusal (on_refusal=stop): rank{self.ctx.rank} slot={p.slot} "
            f"pass={p.pass_id} told=[{','.join(map(str, told))}] "
            f"reached=[{','.join(map(str, reached))}]: cannot execute {what}{note}"
        )

    def warn_each(self, p, obs: list[list[int]], kind: str) -> None:
        """One warning per entry this rank cannot run, naming rank, rid, told and local."""
        ctx = self.ctx
        for rank, rid, told, local in obs:
            msg = f"rank{rank} {kind} rid={rid} told={told} local={local}"
            print(f"ppx warning: {msg}", file=sys.stderr)
            ctx.events.emit(kind, p.pass_id, p.slot, rid, ctx.epoch, msg)
        self.n["refusals" if kind == "refusal" else "retractions"] += len(obs)
        ctx.board.add(F.RETRACTIONS, len(obs))

    def retract(self, p, entries: list[Entry], obs: list[list[int]]) -> None:
        ctx, s = self.ctx, self.ctx.sched
        self.warn_each(p, obs, "refusal" if self.executes else "retract")
        if self.stops:
            self.n["stops"] += 1
            ctx.stop(self.stop_reason(p, entries, obs), p)
        incarnation = {e.rid: s.reqs[e.rid].admit_seq for e in entries}
        s.hold_void(
            SlotBatch(
                p.slot,
                p.pass_id,
                "prefill",
                entries,
                voided=True,
                placed=False,
                incarnation=incarnation,
                obs=obs,
            )
        )
        p.batch = s.inflight[p.slot]
