"""`engine.width_check`: what a proxy receive checks against this rank's batch
(sgl-project#631, #791c).

- `fingerprint` (default): the row count and the batch fingerprint (rid and extend length per
  entry), so a same-width divergence -- the same number of rows belonging to other requests --
  is caught too.
- `rows`: the row count only; a same-width divergence serves silently (only the oracle sees
  the wrong tokens).
- `retracted` (#791c's receive guard, boot instr17): the receiving rank asks "did I retract
  anything from this pass?" before the row count, and refuses by name (rid, told, local of
  each entry it excluded). Nothing crosses the wire: the rank that excluded the entries is the
  rank that receives the wider proxy, at the top of the same pass. Only this rank's own
  exclusions count; an entry another rank excluded is not its to refuse.
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Variant, select

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

    def refusal(self, rank: int, batch) -> str | None:
        """Why `rank` refuses this pass's proxy before comparing anything, or None."""
        return None


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


class Retracted(WidthCheck):
    name = "retracted"
    ref = "sgl-project#791c (the receive guard)"
    about = "a rank that excluded entries of this pass refuses its proxy by rid/told/local"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if select(cfg, "engine.admission.retraction") == "partial":
            return None
        # a whole-pass retraction voids the pass: no proxy is ever checked against it
        return f"{cls.switch()} needs engine.admission.retraction=partial (nothing else excludes)"

    def refusal(self, rank: int, batch) -> str | None:
        # the fork's test is `retracted_by_rank == self`: only what THIS rank excluded
        mine = [row for row in batch.excluded if row[0] == rank]
        if not mine:
            return None
        what = ", ".join(f"rid={rid} told={told} local={local}" for _r, rid, told, local in mine)
        return (
            f"#791c retracted pass: rank{rank} slot={batch.slot} pass={batch.pass_id} excluded "
            f"{what} from the pass its upstream ran whole"
        )

    def agrees(self, rows: int, theirs: list[int], batch) -> bool:
        return rows == batch.num_tokens  # the fork's tripwire behind the guard: the row count
