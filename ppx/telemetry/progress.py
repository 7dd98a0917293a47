"""Live progress on the terminal for runs longer than a few seconds."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, every_s: float, total: int | None) -> None:
        self.every_s, self.total = every_s, total
        self.t0 = time.time()
        self.last = self.t0

    def maybe(
        self, served: int, tokens: int, flips: int, voids: int, inflight: int, status: str
    ) -> None:
        now = time.time()
        if now - self.last < self.every_s or now - self.t0 < 2.0:
            return
        self.last = now
        el = now - self.t0
        total = f"/{self.total}" if self.total else ""
        sys.stderr.write(
            f"[ppx {el:6.1f}s] served {served}{total}  tokens {tokens}  {tokens / el:7.1f} tok/s  "
            f"flips {flips}  voids {voids}  inflight {inflight}  {status}\n"
        )
        sys.stderr.flush()
