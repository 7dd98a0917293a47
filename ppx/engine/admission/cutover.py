"""The cutover seam: what a flip's cutover tells the admission designs (held by flip.py).

`released`: the old layout's KV is gone, so the #1175 carrier forgets what it folded (the
layout and the host tier change: a number of the old layout read as the new one's floor was
a false #1176). `readmit`: a resident is re-admitted into the new layout's queue, where the
log applied a told row stamped on it (`_add_request_to_queue`; engine.admission.told_scope,
flip.epoch_advance). Both are inert for rank_local: it has no carrier and stamps no row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ppx.core import Req
    from ppx.engine.context import RankContext
    from ppx.protocol.prefetch_carrier import Carrier
    from ppx.protocol.told_scope import ToldScope


class CutoverSeam:
    def __init__(self, ctx: RankContext, told_rows: ToldScope, carrier: Carrier | None) -> None:
        self.ctx, self.told_rows, self.carrier = ctx, told_rows, carrier

    def released(self) -> None:
        if self.carrier is not None:
            self.carrier.reset()

    def readmit(self, req: Req) -> None:
        # the tree match only for a request that carries a row: the new tree holds what it
        # holds (nothing, unless a host tier loads it back)
        if self.told_rows.holds(req.rid):
            local = self.ctx.sched.cache.tree_match(req.tokens)
            self.told_rows.readmit(self.ctx, req.rid, local)
