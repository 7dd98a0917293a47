"""The TP phase: every rank runs every layer on its shard of heads and MLP columns.

Rank 0 schedules and broadcasts the batch (new requests + entries, lengths only); every rank
computes with all-reduces over gloo and keeps the KV of its own head shard; rank 0's sampled
tokens are broadcast so every rank appends exactly the same ones. One batch at a time: there
is no pipeline to fill in this phase.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ppx.core import Flag, Kind, Message
from ppx.engine.admission import codec
from ppx.engine.board import F, Op
from ppx.engine.codec import decode_requests, encode_requests

HEADER = 8  # flags, pass_id, epoch, mode, request ints, entry rows, entry cols, spare


class TPPhase:
    def __init__(self, loop) -> None:
        self.loop = loop

    def _bcast(self, t: torch.Tensor, pass_id: int) -> torch.Tensor:
        loop = self.loop
        since = loop.board.block(
            Op.RECV, 0 if loop.rank else -1, Kind.TP, 0, pass_id, -1, int(t.numel())
        )
        dist.broadcast(t, 0)
        loop.board.unblock(Op.RECV, 0, Kind.TP, 0, pass_id, -1, since)
        return t

    def run_pass(self, pass_id: int) -> tuple[bool, bool]:
        """One TP pass; returns (shutdown, flip)."""
        loop, s = self.loop, self.loop.sched
        head = torch.zeros(HEADER, dtype=torch.int64)
        entries = []
        if loop.is_first:
            reqs, flags = loop.intake.take(idle=s.idle)
            if loop.flip.due(pass_id):
                flags |= Flag.FLIP
            s.add(reqs)
            batch = None if flags & Flag.FLIP else loop.policy.local_prefill(0, pass_id)
            entries = batch.entries if batch else []
            req_t = encode_requests(reqs)
            req_flat = req_t[0] if req_t else torch.zeros(0, dtype=torch.int64)
            ent = codec.encode(batch.entries if batch else [])
            mode = codec.MODES[batch.mode] if batch else 0
            head[:7] = torch.tensor(
                [flags, pass_id, loop.epoch, mode, req_flat.numel(), ent.shape[0], ent.shape[1]]
            )
        self._bcast(head, pass_id)
        flags, _, epoch, mode, n_req, rows, cols = head[:7].tolist()
        if epoch != loop.epoch:
            loop.stop(
                f"epoch desync in the TP phase: rank0 epoch={epoch}, rank{loop.rank} epoch={loop.epoch}"
            )
        payload = torch.zeros(n_req + rows * cols, dtype=torch.int64)
        if loop.is_first:
            payload = torch.cat([req_flat, ent.flatten()])
        if payload.numel():
            self._bcast(payload, pass_id)
        obs = torch.zeros((loop.world, 4), dtype=torch.int64)
        if not loop.is_first:
            if n_req:
                s.add(decode_requests(Message(Kind.CHAIN, tensors=[payload[:n_req]])))
            entries = codec.decode(payload[n_req:].reshape(rows, cols)) if rows else []
            batch = self._follow(entries, codec.MODE_NAMES[mode], pass_id, obs) if mode else None
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
            since = loop.board.block(Op.COMPUTE, -1, 0, 0, pass_id, -1)
            tokens = loop.model.forward(fi, loop.cache.k, loop.cache.v, loop.cache.req_to_token)
            loop.board.unblock(Op.COMPUTE, -1, 0, 0, pass_id, -1, since)
            batch.launched = True
            s.after_launch(batch)
            loop.board.add(F.WORK_PASSES)
            tokens = self._bcast(tokens.to("cpu", torch.int64).contiguous(), pass_id)
            msg = Message(Kind.OUTPUT, 0, pass_id, loop.epoch, tensors=[tokens])
            loop.apply_output(0, batch, msg, None)
        return bool(flags & Flag.SHUTDOWN), bool(flags & Flag.FLIP)

    def _follow(self, entries, mode: str, pass_id: int, obs: torch.Tensor):
        """Followers execute rank 0's schedule exactly; one whose cache cannot (its own host
        load still pending, say) reports [1, rid, told, local] instead of a batch."""
        loop, s = self.loop, self.loop.sched
        if mode == "decode":
            return s.place(entries, 0, pass_id, "decode")
        for e in entries:
            req = s.reqs[e.rid]
            if req is s.chunked and e.continues:
                continue
            local = s.cache.match(req.tokens) if not e.continues else 0
            if e.continues != (req is s.chunked) or (
                local < e.prefix_len and s.cache.tree_match(req.tokens) < e.prefix_len
            ):
                obs[loop.rank] = torch.tensor([1, e.rid, e.prefix_len, local])
                loop.board.add(F.RETRACTIONS)
                if hasattr(loop.policy, "n"):
                    loop.policy.n["retractions"] += 1
                loop.events.emit(
                    "retract",
                    pass_id,
                    0,
                    e.rid,
                    loop.epoch,
                    f"rank{loop.rank} TP phase told={e.prefix_len} local={local}",
                )
                return None
        placed = []
        for e in entries:
            got = s.admit_entry(s.reqs[e.rid], e.prefix_len, e.extend_len)
            if got is None or got.extend_len != e.extend_len:
                loop.stop(
                    f"TP phase: rank{loop.rank} cannot execute rid={e.rid} "
                    f"prefix_len={e.prefix_len} extend_len={e.extend_len}"
                )
            placed.append(got)
        return s.place(placed, 0, pass_id, "prefill")

    def _allreduce(self, t: torch.Tensor, pass_id: int) -> None:
        loop = self.loop
        since = loop.board.block(Op.RECV, -1, Kind.TP, 0, pass_id, -1)
        dist.all_reduce(t)
        loop.board.unblock(Op.RECV, -1, Kind.TP, 0, pass_id, -1, since)

    def _void(self, batch, entries, bad: list[list[int]], pass_id: int) -> None:
        """Every rank puts the pass's requests back exactly as rank 0 does, a mid-prefill
        request included (its next chunk must not survive on one rank only)."""
        loop, s = self.loop, self.loop.sched
        if batch is not None:
            s.void(batch)
        else:
            for e in entries:
                req = s.reqs.get(e.rid)
                if req is not None and (req is s.chunked or req.row >= 0):
                    s.requeue(req)
        loop.board.add(F.VOIDS)
        loop.policy.absorb_tp_void([row[1:] for row in bad], pass_id)


def all_reducer(loop):
    """The all-reduce a TP-sharded layer calls, with its blocked-on record."""

    def reduce(x: torch.Tensor) -> torch.Tensor:
        buf = x.to("cpu").contiguous() if x.device.type != "cpu" else x.contiguous()
        since = loop.board.block(Op.RECV, -1, Kind.TP, 0, -1, -1, int(buf.shape[0]))
        dist.all_reduce(buf)
        loop.board.unblock(Op.RECV, -1, Kind.TP, 0, -1, -1, since)
        return buf.to(x.device)

    return reduce
