"""The return path of a decision design: the laps rank 0 reads back from the last rank, and
the voids that come back on the output ring (or the TP phase's all-reduce), absorbed before
the requests are offered again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.core import POOL_SHORT, Flag, Kind
from ppx.engine.admission.base import ReturnPath
from ppx.engine.board import F

if TYPE_CHECKING:
    from ppx.core import Message, SlotBatch
    from ppx.engine.admission.decision_parts import DecisionParts
    from ppx.engine.context import RankContext
    from ppx.engine.loop import PassState


class DecisionReturn(ReturnPath):
    def __init__(self, ctx: RankContext, parts: DecisionParts) -> None:
        self.ctx, self.parts = ctx, parts
        self.livelock_passes = int(ctx.cfg.engine.liveness.livelock_passes)
        self.void_streak: list[tuple[int, ...]] = []
        self.void_slots: list[int] = []  # the slot of each voided pass in the streak (#798)
        self.laps = 0

    def lap(self, p: PassState, block: bool) -> None:
        """Rank 0 absorbs the laps that came back. Blocking on this pass's lap (the wraparound
        before sgl-project#796) waits on the last rank, which waits on the decision rank 0 has
        not sent yet when the lap step comes first: every rank ends up receiving."""
        ctx, carrier = self.ctx, self.parts.carrier
        if not ctx.is_first or ctx.world == 1:
            return
        if block:
            if p.decision is not None and p.decision.flags & Flag.HAS_ENTRIES:
                self.absorb_lap(ctx.ch.recv(ctx.world - 1, Kind.LAP, p.slot, p.pass_id))
        else:
            while (msg := ctx.ch.try_recv(ctx.world - 1, Kind.LAP)) is not None:
                self.absorb_lap(msg)
        if carrier is not None and carrier.owe == p.pass_id:
            # the lap this pass's decision said rank 0 owes (nothing in flight to read it)
            self.absorb_lap(ctx.ch.recv(ctx.world - 1, Kind.LAP, p.slot, p.pass_id))

    def absorb_lap(self, msg: Message) -> None:
        self.laps += 1
        carrier = self.parts.carrier
        # a lap that left the last rank before a cutover carries numbers of the old layout
        # (the carrier was reset there): read late, it must not become the new layout's floor
        if carrier is not None and msg.epoch == self.ctx.epoch:
            carrier.absorb(msg.aux)

    def absorb(self, slot: int, batch: SlotBatch, msg: Message, p: PassState | None) -> bool:
        ctx, parts = self.ctx, self.parts
        if not msg.flags & Flag.VOID:
            if ctx.is_first and msg.tensors and msg.tensors[0].numel():
                self.void_streak.clear()
                self.void_slots.clear()
            if ctx.is_first and batch.mode == "prefill":
                # every rank computed these prompts: a floor over them is stale (#963)
                for e in batch.entries:
                    req = ctx.sched.reqs.get(e.rid)
                    if req is not None:
                        parts.guard.prefix_served(req.tokens[: e.end])
            return False
        obs = msg.tensors[1].tolist() if len(msg.tensors) > 1 else []
        if ctx.is_first:  # the guard learns before the requests are re-offered
            parts.guard.learn_void(obs, self.tokens_of)
            parts.offer.voided({row[1] for row in obs})
            self.check_capacity(obs, p)
        requeued = parts.voids.void(ctx.sched, batch, first=ctx.is_first)
        parts.n["voids"] += 1
        ctx.board.add(F.VOIDS)
        ctx.events.emit(
            "void",
            p.pass_id if p is not None else -1,
            slot,
            obs[0][1] if obs else -1,
            ctx.epoch,
            f"pass {batch.pass_id} requeued {[r.rid for r in requeued]} obs {obs}",
        )
        if ctx.is_first:
            self.count_void(tuple(obs[0][1:]) if obs else (-1, -1, -1), "", p, batch.slot)
        return True

    def absorb_tp_void(self, obs: list[list[int]], pass_id: int) -> None:
        self.parts.n["voids"] += 1
        if self.ctx.is_first:
            # the rows come in rank order from the all-reduced table; the rank itself is not
            # needed here, only the order (engine.guard.unit folds later rows of a rid)
            rows = [[i, *row] for i, row in enumerate(obs)]
            self.parts.guard.learn_void(rows, self.tokens_of)
            self.check_capacity(rows, None)
            self.count_void(tuple(obs[0]), " (TP phase)", None, 0)

    def check_capacity(self, obs: list[list[int]], p: PassState | None) -> None:
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
        req = self.ctx.sched.reqs.get(rid)
        return req.tokens if req is not None else []

    def count_void(self, key: tuple[int, ...], where: str, p: PassState | None, slot: int) -> None:
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
        self.parts.n["retractions"] += n
