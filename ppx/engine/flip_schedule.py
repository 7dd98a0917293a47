"""When a flip is due (rank 0 only): the stopwatch or pass count since the last cutover,
`flip.max_flips`, the `flip.due` design's wait on a prompt mid-prefill, and the churn bound
counted once a pass (engine/churn.py). Only rank 0 reads the clock; the others learn the
flip from the chain (or the TP broadcast), so no two ranks can decide differently. Under
faults.timing=choice a flip whose time has come is due once the simulator's scheduler lands
its moment (Transport.moment): at the pass the config names or at any later one.

Both clocks start at the pass that takes the run's first request, not at boot. On real
processes rank 0 spins idle passes (intake.IDLE_WAIT_S) while the frontend starts its
workload, and how many depends on the machine's load; counted, they made
`flip.every_passes=5` cut over with one prompt mid-prefill on one run and three on the next
(the #959 gloo red served one run in three). On the simulator the first request lands at
pass 0, so nothing moves there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.engine.churn import Churn
from ppx.protocol.flip_due import FlipDue

if TYPE_CHECKING:
    from ppx.engine.context import RankContext
    from ppx.engine.transport.base import Arrival
    from ppx.protocol.registry import Protocol


class FlipSchedule:
    def __init__(self, ctx: RankContext, proto: Protocol) -> None:
        self.ctx = ctx
        self.clock = ctx.t.now  # wall time, or the simulator's virtual time
        f, engine = ctx.cfg.flip, ctx.cfg.engine
        self.enabled = bool(f.enabled)
        self.every_s, self.every_passes = float(f.every_s), int(f.every_passes)
        self.max_flips = int(f.max_flips)
        self.when = proto.of(FlipDue)  # flip.due: may a due flip start at this pass?
        self.last_cutover_t = self.clock()
        self.last_cutover_pass = 0
        self.started = False  # has rank 0 taken a request yet? (the clocks start there)
        self.flips = 0
        self.waited = 0  # passes the flip now due has waited on a prefill (rank 0)
        self.landing: Arrival | None = None  # the next flip's moment, once armed
        self.deferred = 0
        # the livelock bound across cutovers (rank 0)
        self.churn = Churn(
            ctx,
            self.when.name,
            int(engine.liveness.livelock_flips),
            int(engine.liveness.livelock_readmits),
        )

    def due(self, pass_id: int, draining: bool, arrived: bool) -> bool:
        """Rank 0: is a flip due at this pass (which took requests if `arrived`)? Rank 0 also
        counts the churn here, once a pass in either phase, and stops the run at its bound."""
        if not self.enabled:
            return False
        self.churn.check(pass_id)
        if not self.started:
            if not arrived:
                return False
            self.started = True
            self.last_cutover_t, self.last_cutover_pass = self.clock(), pass_id
        if draining or (self.max_flips and self.flips >= self.max_flips):
            return False
        ran_out = bool(self.every_passes) and pass_id - self.last_cutover_pass >= self.every_passes
        ran_out |= bool(self.every_s) and self.clock() - self.last_cutover_t >= self.every_s
        if not ran_out:
            return False
        if self.landing is None:  # landed at once under fixed timing: due at this pass
            self.landing = self.ctx.t.moment("flip due")
        if not self.landing.landed():
            return False
        chunked = self.ctx.sched.chunked  # rank 0's prompt mid-prefill, if any
        if self.when.waits(chunked is not None, self.waited):
            if not self.waited and chunked is not None:  # named once per wait
                self.ctx.events.emit(
                    "flip_wait",
                    pass_id,
                    -1,
                    chunked.rid,
                    self.ctx.epoch,
                    f"rid={chunked.rid} mid-prefill {chunked.computed}/{chunked.seq_len} "
                    f"(flip.due={self.when.name})",
                )
            self.waited += 1
            self.deferred += 1
            return False
        return True

    def cut_over(self, pass_id: int) -> None:
        """A cutover ended at `pass_id`: the next flip counts from here."""
        self.flips += 1
        self.waited = 0
        self.landing = None  # the next flip's moment is armed afresh
        self.last_cutover_t, self.last_cutover_pass = self.clock(), pass_id
