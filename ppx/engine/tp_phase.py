"""The TP phase: every rank runs every layer on its shard of heads and MLP columns.

Rank 0 schedules and broadcasts the batch (new requests + entries, lengths only); every rank
computes with all-reduces over gloo and keeps the KV of its own head shard; rank 0's sampled
tokens are broadcast so every rank appends exactly the same ones. One batch at a time: there
is no pipeline to fill in this phase.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ppx.core import Flag, Kind, Message
from ppx.engine.admission import codec
from ppx.engine.board import F, Op
from ppx.engine.codec import decode_requests, encode_requests
from ppx.protocol.told_scope import ToldScope

if TYPE_CHECKING:
    from ppx.engine.admission.seams import Seams
    from ppx.engine.context import RankContext
    from ppx.engine.flip import FlipControl
    from ppx.engine.intake import Intake
    from ppx.engine.results import Results
    from ppx.protocol.registry import Protocol

HEADER = 8  # flags, pass_id, epoch, mode, request ints, entry rows, entry cols, floor query


class TPPhase:
    def __init__(
        self,
        ctx: RankContext,
        seams: Seams,
        proto: Protocol,
        flip: FlipControl,
        intake: Intake | None,
        results: Results,
    ) -> None:
        self.ctx, self.flip, self.intake, self.results = ctx, flip, intake, results
        self.prefill, self.returns, self.floor = seams.prefill, seams.returns, seams.floor
        self.told_rows = proto.of(ToldScope)  # a told row from the PP phase (told_scope)

    def _bcast(self, t: torch.Tensor, pass_id: int) -> torch.Tensor:
        ctx = self.ctx
        since = ctx.board.block(
            Op.RECV, 0 if ctx.rank else -1, Kind.TP, 0, pass_id, -1, int(t.numel())
        )
        ctx.t.broadcast(t, 0)
        ctx.board.unblock(Op.RECV, 0, Kind.TP, 0, pass_id, -1, since)
        return t

    def run_pass(self, pass_id: int) -> tuple[bool, bool]:
        """One TP pass; returns (shutdown, flip)."""
        ctx, s = self.ctx, self.ctx.sched
        head = torch.zeros(HEADER, dtype=torch.int64)
        entries = []
        if ctx.is_first:
            assert self.intake is not None, "rank 0 holds the intake"
            reqs, flags = self.intake.take(idle=s.idle)
            if self.flip.due(pass_id, bool(reqs)):
                flags |= Flag.FLIP
            s.add(reqs)
            batch = None if flags & Flag.FLIP else self.prefill.form(0, pass_id)
            entries = batch.entries if batch else []
            req_t = encode_requests(reqs)
            req_flat = req_t[0] if req_t else torch.zeros(0, dtype=torch.int64)
            ent = codec.encode(batch.entries if batch else [])
            mode = codec.MODES[batch.mode] if batch else 0
            head[:7] = torch.tensor(
                [flags, pass_id, ctx.epoch, mode, req_flat.numel(), ent.shape[0], ent.shape[1]]
            )
            head[7] = self.floor.query(pass_id) + 1  # #1175: 0 = no rid asked about
        self._bcast(head, pass_id)
        flags, _, epoch, mode, n_req, rows, cols, asked = head.tolist()
        if epoch != ctx.epoch:
            ctx.stop(
                f"epoch desync in the TP phase: rank0 epoch={epoch}, rank{ctx.rank} epoch={ctx.epoch}"
            )
        payload = torch.zeros(n_req + rows * cols, dtype=torch.int64)
        if ctx.is_first:
            payload = torch.cat([req_flat, ent.flatten()])
        if payload.numel():
            self._bcast(payload, pass_id)
        obs = torch.zeros((ctx.world, 4), dtype=torch.int64)
        if not ctx.is_first:
            if n_req:
                s.add(decode_requests(Message(Kind.CHAIN, tensors=[payload[:n_req]])))
            entries = codec.decode(payload[n_req:].reshape(rows, cols)) if rows else []
            batch = self._follow(entries, codec.MODE_NAMES[mode], pass_id, obs) if mode else None
        # at this pass, not at the PP phase's next schedule step (the rank's event log)
        s.moves.report_admits(ctx.events.emit, pass_id, 0, ctx.epoch)
        if asked:
            self._floor(asked - 1, pass_id)
        if mode:
            # a rank that cannot execute the schedule voids the pass for every rank (there is
            # no ring to carry a void here: one all-reduce of what each rank observed)
            self._allreduce(obs, pass_id)
            bad = [row for row in obs.tolist() if row[0]]
            if bad:
                self._void(batch, entries, bad, pass_id)
                batch = None
        if batch is not None:
            fi = s.inputs(batch, first_stage=True)
            since = ctx.board.block(Op.COMPUTE, -1, 0, 0, pass_id, -1)
            tokens = ctx.model.forward(fi, ctx.cache.k, ctx.cache.v, ctx.cache.req_to_token)
            ctx.board.unblock(Op.COMPUTE, -1, 0, 0, pass_id, -1, since)
            batch.launched = True
            s.after_launch(batch)
            ctx.board.add(F.WORK_PASSES)
            tokens = self._bcast(tokens.to("cpu", torch.int64).contiguous(), pass_id)
            msg = Message(Kind.OUTPUT, 0, pass_id, ctx.epoch, tensors=[tokens])
            self.results.apply(0, batch, msg, None)
            self.flip.note_tp_batch([e.rid for e in batch.entries if e.final])
        return bool(flags & Flag.SHUTDOWN), bool(flags & Flag.FLIP)

    def _follow(self, entries, mode: str, pass_id: int, obs: torch.Tensor):
        """Followers execute rank 0's schedule exactly; one whose cache cannot (its own host
        load still pending, say) reports [1, rid, told, local] instead of a batch."""
        ctx, s = self.ctx, self.ctx.sched
        if mode == "decode":
            return s.place(entries, 0, pass_id, "decode")
        # as rank 0 did before forming this batch (#959): the upstream rule's own guard
        self.prefill.second.resume_resident(s)
        for e in entries:
            req = s.reqs[e.rid]
            if req is s.cont() and e.continues:
                continue
            local = s.cache.match(req.tokens) if not e.continues else 0
            if not e.continues:  # a told row from the PP phase (told_scope), before this one
                self.told_rows.check(ctx, e.rid, s.cache.tree_match(req.tokens), e.prefix_len)
            if e.continues != (req is s.cont()) or (
                local < e.prefix_len and s.cache.tree_match(req.tokens) < e.prefix_len
            ):
                obs[ctx.rank] = torch.tensor([1, e.rid, e.prefix_len, local])
                ctx.board.add(F.RETRACTIONS)
                self.returns.count_retraction(1)
                ctx.events.emit(
                    "retract",
                    pass_id,
                    0,
                    e.rid,
                    ctx.epoch,
                    f"rank{ctx.rank} TP phase told={e.prefix_len} local={local}",
                )
                return None
        placed = []
        for e in entries:
            got = s.admit_entry(s.reqs[e.rid], e.prefix_len, e.extend_len)
            if got is None or got.extend_len != e.extend_len:
                ctx.stop(
                    f"TP phase: rank{ctx.rank} cannot execute rid={e.rid} "
                    f"prefix_len={e.prefix_len} extend_len={e.extend_len}"
                )
            placed.append(got)
        return s.place(placed, 0, pass_id, "prefill")

    def _floor(self, rid: int, pass_id: int) -> None:
        """#1175 in the TP phase: every follower's completion for the rid rank 0 deferred,
        on one all-reduce every rank enters (the header said so), folded by rank 0. Looking
        the rid up starts a follower's load-back, as the stamp on the PP decision does."""
        rows = self.floor.rows(rid)
        self._allreduce(rows, pass_id)
        if self.ctx.is_first:
            self.floor.absorb(rid, rows)

    def _allreduce(self, t: torch.Tensor, pass_id: int) -> None:
        ctx = self.ctx
        since = ctx.board.block(Op.RECV, -1, Kind.TP, 0, pass_id, -1)
        ctx.t.all_reduce(t)
        ctx.board.unblock(Op.RECV, -1, Kind.TP, 0, pass_id, -1, since)

    def _void(self, batch, entries, bad: list[list[int]], pass_id: int) -> None:
        """Every rank puts the pass's requests back exactly as rank 0 does, a mid-prefill
        request included (its next chunk must not survive on one rank only)."""
        ctx, s = self.ctx, self.ctx.sched
        if batch is not None:
            s.void(batch)
        else:
            for e in entries:
                req = s.reqs.get(e.rid)
                if req is not None and (req in s.continuations() or req.row >= 0):
                    s.requeue(req)
        ctx.board.add(F.VOIDS)
        self.returns.absorb_tp_void([row[1:] for row in bad], pass_id)


def all_reducer(ctx: RankContext):
    """The all-reduce a TP-sharded layer calls, with its blocked-on record."""

    def reduce(x: torch.Tensor) -> torch.Tensor:
        buf = x.to("cpu").contiguous() if x.device.type != "cpu" else x.contiguous()
        since = ctx.board.block(Op.RECV, -1, Kind.TP, 0, -1, -1, int(buf.shape[0]))
        ctx.t.all_reduce(buf)
        ctx.board.unblock(Op.RECV, -1, Kind.TP, 0, -1, -1, since)
        return buf.to(x.device)

    return reduce
