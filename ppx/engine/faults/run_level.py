"""Faults on the run rather than a rank's data path (hook `RunLevel`, asked by the
supervisors and the plan's pool sizes):

- `faults.pool`: rank `rank`'s KV pool holds `tokens` instead of engine.kv's size, so under
  shared-prefix pressure it evicts prefixes its peers still have (an honest, seeded source of
  divergence);
- `faults.kill`: rank `rank` is SIGKILLed `after_s` seconds after boot (virtual seconds on
  the simulator): the watchdog must say dead_peer, not wedged.
"""

from __future__ import annotations

from ppx.engine.faults.base import OneRank, RunLevel


class Pool(OneRank, RunLevel):
    key = "pool"

    def pool_sizes(self, sizes: list[int]) -> list[int]:
        rank = int(self.section.rank)
        if 0 <= rank < len(sizes):
            sizes = [*sizes]
            sizes[rank] = int(self.section.tokens)
        return sizes


class Kill(OneRank, RunLevel):
    key = "kill"

    def kill(self, world: int) -> tuple[int, float] | None:
        rank = int(self.section.rank)
        return (rank, float(self.section.after_s)) if 0 <= rank < world else None
