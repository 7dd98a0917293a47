"""One rank that behaves unlike its peers:

- `faults.lifo` (hook `Candidates`): this rank scans its waiting queue newest-first (a
  scheduling skew: under engine.admission.batch_order=queue it runs rank 0's rows in another
  order);
- `faults.epoch_desync` (hook `Cutover`): this rank miscounts its first cutover's epoch (the
  epoch check's all-gather must name it).
"""

from __future__ import annotations

from ppx.core import Req
from ppx.engine.faults.base import Candidates, Cutover, OneRank


class Lifo(OneRank, Candidates):
    key = "lifo"

    def order(self, waiting: list[Req]) -> list[Req]:
        return waiting[::-1]


class EpochDesync(OneRank, Cutover):
    key = "epoch_desync"

    def extra_epochs(self, flips: int) -> int:
        return 1 if flips == 0 else 0
