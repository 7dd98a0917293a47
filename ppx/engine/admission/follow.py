"""A follower of `decision` / `forwarded` / `row_authority`: form this rank's batch from rank 0's
decision, or say by name why it cannot (a retraction, a refusal, a stop).

`told` is rank 0's prefix_len; `local` is what this rank holds of the rid: its radix match for
a fresh admission, the extent it placed for a continuation (the same pipeline position as
rank 0's plan; `engine.admission.local_extent=completed` reads the chunks whose results came
back instead, the log's stagger). Mismatches are collected over the whole decision first, so
the void (or stop) names every rid this rank could not run. `engine.admission.follower_seats=veto`
adds the rids beyond this rank's own seat count (ppx/engine/admission/seats.py, #1153 F2).
"""

from __future__ import annotations

import sys

from ppx.core import SlotBatch
from ppx.engine.admission import codec, seats
from ppx.engine.board import F
from ppx.engine.guard import POOL_SHORT, SEATS_SHORT, UNRESOLVED


class Follower:
    """Mixed into DecisionPolicy, which owns the state used here (ctx, sched, rec, n, ...)."""

    def apply(self, p) -> None:
        """Form this follower's batch from the decision (after both the chain and the decision
        of this pass are in)."""
        ctx, s = self.ctx, self.sched
        mode = codec.MODE_NAMES[p.decision.aux[0]]
        if mode == "none":
            p.batch = None
            return
        if mode == "decode":
            entries = s.decode_entries(p.slot)
            n, checksum = p.decision.aux[1], p.decision.aux[2]
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
        obs = []
        for e in entries:
            req = s.reqs.get(e.rid)
            if req is None:
                ctx.stop(
                    f"decision names rid {e.rid} unknown to rank{ctx.rank} (pass {p.pass_id})", p
                )
            held = self.rec.held_chunked(s, req, p.slot)
            missed = self.rec.missed(s, req, e, p.slot)
            if e.continues != held and not missed:
                # the continuation path obeys the decision too: a chunk that continues a
                # prefill this rank never started (or a fresh admission of what this rank has
                # mid-prefill) is a divergence, reported with what this rank holds
                obs.append([ctx.rank, e.rid, e.prefix_len, req.computed if held else 0])
                continue
            if not held:
                self.check_told_row(e.rid, s.cache.tree_match(req.tokens), e.prefix_len)
                self.told_rows.stamp(e.rid, e.prefix_len, ctx.epoch)
            if missed:
                local = UNRESOLVED
            else:
                local = self.rec.held_extent(s, req) if held else self.local_match(req)
            if (
                local == UNRESOLVED
                and not missed
                and s.cache.tree_match(req.tokens) >= e.prefix_len
            ):
                local = s.cache.tree_match(req.tokens)  # a pending load does not matter here
            local = self.guard.read_miss(local)  # engine.guard.miss=zero: a false 0
            ok = local != UNRESOLVED and (local == e.prefix_len if held else local >= e.prefix_len)
            if not ok:
                obs.append([ctx.rank, e.rid, e.prefix_len, local])
        if self.seat_veto:
            # follower_seats=veto: the pre-#1153-F2 count gates on a forwarded schedule; this
            # rank's own seat count refuses the rids beyond it, whatever its allocator holds
            vetoed, self.seat_note = seats.veto(s, entries, ctx.rank)
            named = {row[1] for row in obs}
            vetoed = [row for row in vetoed if row[1] not in named]
            self.n["seat_vetoes"] += len(vetoed)
            obs += vetoed
        if obs:
            self.retract(p, entries, obs)
            return
        # engine.admission.batch_order=queue (#791 forwarded slice 1, its stated gap): this
        # rank's own candidate order, taken before the admissions below leave the queue
        order = {r.rid: i for i, r in enumerate(s.candidates())} if self.queue_order else {}
        admitted, budget = [], s.chunk_size
        for e in entries:
            req = s.reqs[e.rid]
            if e.continues and req is not s.chunked:
                self.rec.repoint(s, req)
            if self.rederive and not self.rec.held_chunked(s, req, p.slot):
                # the log's decision mode: truncate to told, then the adder derives both numbers
                # again from this rank's own state, so a prefix its tree holds beyond told (or
                # a host load that landed meanwhile) comes back (instr20: told 0, load-back
                # 512, a 333-token batch against rank 0's 512 rows)
                s.cache.land_prefetches()
                prefix = max(e.prefix_len, s.cache.tree_match(req.tokens))
                got = s.admit_entry(req, prefix, budget)
            else:
                got = s.admit_entry(req, e.prefix_len, e.extend_len)  # truncates local to told
            if got is None:
                # this rank's pool cannot hold what it is told (admissions earlier in this
                # same decision took the room): the same refusal as a missing prefix, never
                # an exception; the void rolls back what this pass admitted so far
                self.retract(p, entries, [[ctx.rank, e.rid, e.prefix_len, POOL_SHORT]])
                return
            admitted.append(got)
            budget -= got.extend_len
            if self.rederive:
                continue  # nothing here compares: the proxy width check is what sees it
            if got.extend_len != e.extend_len or got.final != e.final:
                ctx.stop(
                    f"chunk geometry: rank{ctx.rank} rid {e.rid} told extend {e.extend_len} "
                    f"but would compute {got.extend_len}",
                    p,
                )
        if order:
            # the same rids and lengths, so the same width: only the proxy's fingerprint (or the
            # oracle, behind engine.width_check=rows) sees rows that belong to other requests
            admitted.sort(key=lambda e: order.get(e.rid, -1))
        p.batch = s.place(admitted, p.slot, p.pass_id, "prefill")

    def retract(self, p, entries, obs) -> None:
        ctx = self.ctx
        kind = "refusal" if self.forwarded else "retract"
        for rank, rid, told, local in obs:
            msg = f"rank{rank} {kind} rid={rid} told={told} local={local}"
            print(f"ppx warning: {msg}", file=sys.stderr)
            ctx.events.emit(kind, p.pass_id, p.slot, rid, ctx.epoch, msg)
        self.n["refusals" if self.forwarded else "retractions"] += len(obs)
        ctx.board.add(F.RETRACTIONS, len(obs))
        if self.forwarded and self.on_refusal == "stop":
            self.n["stops"] += 1
            why = f"; {self.seat_note}" if obs[0][3] == SEATS_SHORT else ""
            ctx.stop(
                f"{self.name} refusal (on_refusal=stop): rank{obs[0][0]} cannot execute rid={obs[0][1]} "
                f"prefix_len={obs[0][2]} (local {obs[0][3]}) at slot={p.slot} pass={p.pass_id}"
                + why,
                p,
            )
        incarnation = {e.rid: self.sched.reqs[e.rid].admit_seq for e in entries}
        p.batch = SlotBatch(
            p.slot,
            p.pass_id,
            "prefill",
            entries,
            voided=True,
            placed=False,
            incarnation=incarnation,
            obs=obs,
        )
        self.sched.inflight[p.slot] = p.batch
