"""How long a follower's `told` lives: for its pass, or as a row stamped on the request.

`engine.admission.told_scope`:
- `pass` (default, the end state, sgl-project#1063): a told is used in the pass whose
  decision carried it and nowhere else.
- `promise` (sgl-project#1059): the told is stamped on the request and applied again at a
  later admission of that request. Across a TP<->PP cutover the trees are dropped, so the
  promise names a prefix no rank holds any more: the follower stops the group by name (the
  log's `UniformWidthPromiseBroken`, boots 30/31).
- `epoch` (sgl-project#1061): the stamp carries the epoch it was decided in and is applied
  only in that epoch, so a stale row after a completed cutover is ignored.
"""

from __future__ import annotations

SCOPES = ("pass", "promise", "epoch")


class ToldRows:
    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.rows: dict[int, tuple[int, int]] = {}  # rid -> (told, decided epoch)
        self.applied = self.ignored_stale = 0

    def stamp(self, rid: int, told: int, epoch: int) -> None:
        if self.scope != "pass":
            self.rows[rid] = (told, epoch)

    def check(self, ctx, rid: int, local: int, told_now: int) -> None:
        """At an admission of `rid` on a follower: a row stamped in another epoch (a cutover
        dropped the trees since) is applied (`promise`) or refused by the gate (`epoch`).
        Rows of this epoch are re-stamped by this pass's own decision."""
        row = self.rows.get(rid)
        if row is None or row[1] == ctx.epoch:
            return
        if self.scope == "epoch":
            self.ignored_stale += 1
            del self.rows[rid]
            return
        self.applied += 1
        if row[0] > local:
            ctx.stop(
                f"told row outlived its pass (engine.admission.told_scope={self.scope}): "
                f"rank{ctx.rank} rid={rid} promised told={row[0]} (decided at epoch {row[1]}) "
                f"> local={local} at epoch {ctx.epoch}; this pass told {told_now}"
            )

    def drop(self, rid: int) -> None:
        self.rows.pop(rid, None)

    def counters(self) -> dict:
        return {"told_rows_applied": self.applied, "told_rows_ignored_stale": self.ignored_stale}
