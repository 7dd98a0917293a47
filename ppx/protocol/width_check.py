"""`engine.width_check`: what a proxy receive checks against this rank's batch
(sgl-project#631, #791c).

- `fingerprint` (default): the row count and the batch fingerprint (rid and extend length per
  entry), so a same-width divergence -- the same number of rows belonging to other requests --
  is caught too.
- `rows`: the row count only; a same-width divergence serves silently (only the oracle sees
  the wrong tokens).
"""

from __future__ import annotations

from ppx.protocol.axis import Axis, Variant

AXIS = Axis(
    "engine.width_check",
    "width_check",
    "what a proxy receive checks against this rank's batch",
    default="fingerprint",
)


class WidthCheck(Variant):
    axis = AXIS

    def agrees(self, rows: int, theirs: list[int], batch) -> bool:
        return rows == batch.num_tokens and theirs == batch.fingerprint()


class Fingerprint(WidthCheck):
    name = "fingerprint"
    ref = "sgl-project#631, #791c"
    about = "rows and the batch fingerprint (rid, extend length per entry)"


class Rows(WidthCheck):
    name = "rows"
    ref = "before sgl-project#631's fingerprint"
    about = "the row count only: a same-width divergence passes"

    def agrees(self, rows: int, theirs: list[int], batch) -> bool:
        return rows == batch.num_tokens
