"""Semantic progress and the verdicts that do not come from a rank itself.

Progress is tokens served, requests finished and non-voided passes, never "a forward ran"
or "a pass went by" (idle passes spin forever). A stall with every rank blocked is a wedge;
a stall with a rank still computing is a straggler, not a wedge; a rank whose process is
gone is a dead peer.
"""

from __future__ import annotations

import os
import time

from ppx.engine.board import Board, F, Op, State
from ppx.watch.waitfor import mismatch


class Watchdog:
    def __init__(self, board: Board, procs: list, stall_s: float) -> None:
        self.board, self.procs, self.stall_s = board, procs, stall_s
        self.last_sig: tuple | None = None
        self.last_progress = time.monotonic()
        # tokens only (`extra`: tokens, served, refused): a run whose ranks keep passing
        # without committing a token is stalled even though its passes look like work
        self.last_extra: tuple | None = None
        self.last_token = self.last_progress
        self.status = "ok"
        self.mismatch: str | None = None

    def progress_signature(self, extra: tuple) -> tuple:
        b = self.board
        work = tuple(int(b.fields(r)[F.WORK_PASSES]) for r in range(b.world))
        toks = tuple(int(b.fields(r)[F.TOKENS]) for r in range(b.world))
        return (*extra, work, toks)

    def dead_ranks(self) -> list[int]:
        dead = []
        for r, p in enumerate(self.procs):
            state = int(self.board.fields(r)[F.STATE])
            if state in (State.DONE, State.ERROR):
                continue  # exited through its own report
            # a remote rank (torchrun) has no local pid: its exitcode comes from the mirror
            if p.exitcode is not None or (p.pid is not None and not _alive(p.pid)):
                dead.append(r)
        return dead

    def blocked(self) -> list[dict | None]:
        return [self.board.blocked_on(r) for r in range(self.board.world)]

    def check(self, extra: tuple, outstanding: bool) -> str | None:
        """Returns a verdict (`wedged`, `dead_peer`) or None; keeps `status` for display."""
        now = time.monotonic()
        if self.dead_ranks():
            return "dead_peer"
        if extra != self.last_extra or not outstanding:
            self.last_extra, self.last_token = extra, now
        sig = self.progress_signature(extra)
        if sig != self.last_sig or not outstanding:
            self.last_sig, self.last_progress = sig, now
            self.status = "ok"
            return None
        if now - self.last_progress < self.stall_s:
            return None
        recs = self.blocked()
        # every rank blocked, and blocked for the whole window (a rank that blocked a moment
        # ago may be about to be served: boot, a slow peer)
        waiting = [
            r is not None and r["op"] != Op.COMPUTE.label and r["since_s"] >= self.stall_s
            for r in recs
        ]
        if all(waiting):
            # both ends on one channel, disagreeing on seq or width: a protocol mismatch
            self.mismatch = mismatch(recs)
            return "mismatch" if self.mismatch else "wedged"
        self.status = "straggler"
        return None

    @property
    def tokenless_for(self) -> float:
        return time.monotonic() - self.last_token

    @property
    def stalled_for(self) -> float:
        return time.monotonic() - self.last_progress


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
