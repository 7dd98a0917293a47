"""The row probe: before a follower runs a decision, every rid its row names must be one this
rank can locate (sgl-project#1180, ppx/protocol/row_probe.py).

The fork peeked the stamped proxy frame's admission row without consuming it. ppx's row
travels on the decision, a step before the proxy: a deferred row keeps this pass's decision
and proxy *held* (pulled, so rank 0's flush of the pass completes as the fork's inbox took the
frame, but not run). Deferring means this rank stays in its pass and probes again; what lands
between two probes is a chain hop (a rid's late arrival). The hedge reads the next chain hop
with a blocking receive; a probe without it looks for a hop only where its sender has posted
it (the board's counters, never the gloo wire) after one lap of `LAP_S`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.core import Flag, Kind
from ppx.engine.admission import codec
from ppx.engine.codec import decode_requests

if TYPE_CHECKING:
    from ppx.engine.context import RankContext
    from ppx.protocol.row_probe import RowProbe

# one probe lap: the fork's loop came back to its probe through the 2 ms occupant arm
# (#1071); the cap counts these laps, the clock only lets the peers move between them
LAP_S = 0.002


class RowProbeStep:
    def __init__(self, ctx: RankContext, design: RowProbe) -> None:
        self.ctx, self.design = ctx, design

    def hold_until_locatable(self, p) -> None:
        """Follower, the decision of pass `p` just arrived: return once every rid its row
        names is locatable here, or stop by the design's name."""
        ctx = self.ctx
        if not p.decision.flags & Flag.HAS_ENTRIES:
            return  # a decode pass names no rids: its membership is the slot's residents
        rids = [e.rid for e in codec.decode(p.decision.tensors[0])]
        held = False
        while missing := sorted({rid for rid in rids if rid not in ctx.sched.reqs}):
            v = self.design.observe(ctx.rank, p.slot, (p.pass_id, ctx.epoch), missing, ctx.t.now())
            if v.message is not None:
                ctx.stop(v.message, p)  # the frame stays held: the stop consumes nothing
            ctx.events.emit(
                "row_defer",
                p.pass_id,
                p.slot,
                missing[0],
                ctx.epoch,
                f"rank{ctx.rank} slot={p.slot} pass={p.pass_id} missing={missing} "
                f"probe={v.occurrence} hedge={v.hedge}",
            )
            if not held:  # the frame is taken off the wire, not run (the fork's inbox)
                proxy = ctx.ch.recv(ctx.prev, Kind.PROXY, p.slot, p.pass_id)
                ctx.ch.hold(ctx.prev, proxy)
                held = True
            if v.hedge:
                self.take_chain(p.pass_id + 1)
            else:
                ctx.t.sleep(LAP_S)
                while self.posted():  # a hop its sender posted: reading it cannot block
                    self.take_chain(p.pass_id + 1)
        self.design.clear(p.slot)

    def posted(self) -> bool:
        """The sender posted a chain hop beyond those read ahead already (board counters)."""
        ch, prev = self.ctx.ch, self.ctx.prev
        return ch.board.peer_sent(prev, Kind.CHAIN) > int(ch.board.consumed[prev, Kind.CHAIN])

    def take_chain(self, pass_id: int) -> None:
        """Read the next chain hop ahead of its pass (blocking): its requests become
        locatable now; the hop itself (flags, forwarding) is the chain step's when its pass
        comes (the hops read ahead wait in order)."""
        ctx = self.ctx
        held = list(ctx.ch.held.pop((ctx.prev, int(Kind.CHAIN)), ()))
        msg = ctx.ch.recv(ctx.prev, Kind.CHAIN, -1, pass_id + len(held))
        for m in [*held, msg]:
            ctx.ch.hold(ctx.prev, m)
        ctx.sched.add(decode_requests(msg))
