"""Faults on what a rank's radix tree holds and reports (hook `Readiness`):

- `faults.match_cap`: per rank, the most tokens of any prompt its radix match reports (and so
  reuses): a rank whose tree keeps only the first N tokens of every prompt, the state the
  log's unit harnesses write directly (#630: rank 1 holds 64, rank 2 holds 50 of a 120-token
  offer);
- `faults.cache_drop`: after pass `after_pass`, rank `rank` evicts every cached prefix no
  request holds (a rank-local cache loss its peers do not share). The mirror of
  sgl-project#963's specimen, where one rank alone GAINED a prefix: either way rank 0 holds a
  prefix a follower does not, rank 0 offers it, the follower measures a shortfall honestly,
  and every request over that prefix starts from the same unhonourable told until the group
  serves the prefix again. Under faults.timing=choice the drop is a moment the simulator's
  scheduler lands (Fault.moment): at the end of pass `after_pass` or of any later pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.engine.faults.base import Fault, OneRank, Readiness
from ppx.fault_sections import OFF

if TYPE_CHECKING:
    from ppx.engine.transport.base import Arrival


class MatchCap(Fault, Readiness):
    key = "match_cap"

    def __init__(self, section: Any, cfg: Any, rank: int) -> None:
        super().__init__(section, cfg, rank)
        self.cap = int(section.tokens[rank]) if 0 <= rank < len(section.tokens) else OFF

    @classmethod
    def on(cls, section: Any) -> bool:
        return section.tokens is not None

    def here(self) -> bool:
        return self.cap >= 0  # -1: this rank's match is whole

    @classmethod
    def refuse(cls, section: Any, cfg: Any) -> str | None:
        if section.tokens is None:
            return None
        cap, pp = list(section.tokens), int(cfg.pp)
        if len(cap) != pp or any(int(n) < OFF for n in cap):
            return (
                f"faults.match_cap.tokens={cap}: one token count per rank (pp={pp}), -1 = uncapped"
            )
        return None

    def match(self, n: int) -> int:
        return min(n, self.cap)


class CacheDrop(OneRank, Readiness):
    key = "cache_drop"

    @classmethod
    def refuse(cls, section: Any, cfg: Any) -> str | None:
        rank, at, pp = int(section.rank), int(section.after_pass), int(cfg.pp)
        if rank >= pp or rank < OFF or at < 0:
            return (
                f"faults.cache_drop.rank={rank} faults.cache_drop.after_pass={at}: a rank in "
                f"0..{pp - 1} (-1 = off) and a pass >= 0"
            )
        return None

    def __init__(self, section: Any, cfg: Any, rank: int) -> None:
        super().__init__(section, cfg, rank)
        self.at = int(section.after_pass)
        self.landing: Arrival | None = None  # the drop's moment, once armed
        self.dropped = False

    def after_pass(self, pass_id: int, cache: Any) -> None:
        if self.dropped or pass_id < self.at:
            return
        if self.landing is None:  # landed at once under fixed timing: the drop is at `at`
            self.landing = self.moment("faults.cache_drop")
        if self.landing.landed():
            self.dropped = True
            cache.drop_unlocked()
