"""`engine.admission.row_probe`: what a follower does with a decision row naming a rid it
cannot locate (sgl-project#1180).

The fork's follower peeked the head proxy frame's admission row without consuming it; a row
naming a rid this rank could not locate was deferred (the frame left queued: consuming it
before the chain hop that carries its rids made a plan that finds nothing, boot 631row14),
and a first sighting armed a hedge, a BLOCKING request-chain receive on the next loop
iteration. Boot weg1b7: rank 0 sealed a row naming c25108f3, then retracted that rid
rank-locally (#888b relief); the row could never be satisfied again.

- `stop`: ppx before the probe: a named stop at the first sighting (`decision names rid ...
  unknown`).
- `defer_clock` (8f45927d14, before #1180): the defer is bounded by a wall-clock horizon
  (20 s) and every defer re-arms the blocking hedge, so the loop that samples the clock halts
  in a receive nobody answers (3 defers in one second, then 60 s of silence, a stall kill).
- `defer_laps` (default, #1180): the count is in probes (laps), per slot, keyed by (frame,
  missing set); the cap is #944's (`engine.guard.defer_cap`, one authority, <= 0 disables);
  the hedge is armed on the first sighting only; probe cap + 1 is a named stop that leaves
  the frame queued and keeps the count (a swallowed stop raises again at once). A changing
  missing set or a new frame restarts the count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.policy import policy_of

AXIS = Axis(
    "engine.admission.row_probe",
    "row_probe",
    "what a follower does with a decision row naming a rid it cannot locate",
    default="defer_laps",
    counters=(
        Counter("row_defers"),  # probes that deferred a row
        Counter("row_hedges"),  # blocking chain receives armed by a defer
    ),
)

HORIZON_S = 20.0  # defer_clock: the parent's default horizon (8f45927d14)


@dataclass(frozen=True)
class Verdict:
    """One probe of a row with rids this rank cannot locate."""

    defer: bool  # leave the frame queued and probe again
    hedge: bool  # before the next probe, a blocking receive of the next request chain
    occurrence: int  # consecutive probes of the same (frame, missing set) on this slot
    message: str | None = None  # the named stop, when it does not defer


class RowProbe(Variant):
    axis = AXIS

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.defers = self.hedges = 0

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if cls.name == AXIS.default:
            return None
        p = policy_of(cfg)
        if not p.decides:
            return f"{cls.switch()} means nothing: engine/admission={p.name} sends no rows"
        if int(cfg.pp) < 2:
            return f"{cls.switch()} needs pp >= 2: with one rank nobody follows a row"
        return None

    def observe(
        self, rank: int, slot: int, frame: tuple[int, int], missing: list[int], now: float
    ) -> Verdict:
        """A probe of the row of `frame` (pass, epoch) on `slot`: `missing` are the rids it
        names that this rank cannot locate."""
        raise NotImplementedError

    def clear(self, slot: int) -> None:
        """The slot's row is satisfied: forget its count."""

    def counted(self, v: Verdict) -> Verdict:
        self.defers += v.defer
        self.hedges += v.defer and v.hedge
        return v

    def counters(self) -> dict[str, int]:
        return {"row_defers": self.defers, "row_hedges": self.hedges}


class Stop(RowProbe):
    name = "stop"
    ref = "ppx before sgl-project#1180 (no probe)"
    about = "a named stop at the first sighting"

    def observe(self, rank, slot, frame, missing, now) -> Verdict:
        why = f"decision names rid {missing[0]} unknown to rank{rank} (pass {frame[0]})"
        return Verdict(False, False, 1, why)


class _Counted(RowProbe):
    """A count per slot of consecutive probes of one (frame, missing set)."""

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.seen: dict[int, tuple[tuple, int, float]] = {}  # slot -> (identity, n, first t)

    def bump(self, slot: int, frame: tuple, missing: list[int], now: float) -> tuple[int, float]:
        ident = (frame, frozenset(missing))
        old = self.seen.get(slot)
        n, since = (old[1] + 1, old[2]) if old is not None and old[0] == ident else (1, now)
        self.seen[slot] = (ident, n, since)
        return n, since

    def clear(self, slot: int) -> None:
        self.seen.pop(slot, None)


class DeferClock(_Counted):
    name = "defer_clock"
    ref = "before sgl-project#1180 (8f45927d14: a 20 s horizon)"
    about = "defer within a wall-clock horizon; every defer re-arms the blocking chain hedge"

    def observe(self, rank, slot, frame, missing, now) -> Verdict:
        n, since = self.bump(slot, frame, missing, now)
        if now - since <= HORIZON_S:
            # the hedge on every defer: the next loop iteration blocks on the request chain,
            # and the clock this horizon reads is sampled only by that loop
            return self.counted(Verdict(True, True, n))
        why = (
            f"row defer past its horizon: rank{rank} slot {slot} held the decision of pass "
            f"{frame[0]} for {now - since:.1f}s > {HORIZON_S:g}s (rids={missing})"
        )
        return Verdict(False, False, n, why)


class DeferLaps(_Counted):
    name = "defer_laps"
    ref = "sgl-project#1180 (ROW_DEFER_LAP_CAP = UNRESOLVED_DEFER_CAP)"
    about = "defer up to #944's cap in probes (laps, not seconds), hedge once, then a named stop"

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        # one authority for both unresolvable-rid defers: #944's cap, by name, not a second 3
        self.cap = int(cfg.engine.guard.defer_cap)

    def observe(self, rank, slot, frame, missing, now) -> Verdict:
        n, _ = self.bump(slot, frame, missing, now)
        if self.cap <= 0 or n <= self.cap:  # cap inclusive: `cap` probes defer, cap + 1 stops
            # the hedge on the first sighting only: a repeat of the same missing set does not
            # block on a peer again, so this rank comes back to the probe and the count moves
            return self.counted(Verdict(True, n == 1, n))
        # the count is kept: a caller that swallowed this stop meets it again at once
        why = (
            f"#1180 row defer past its lap cap: rank{rank} slot {slot} has held the same "
            f"decision (pass {frame[0]}, epoch {frame[1]}) for {n} consecutive probes (cap "
            f"{self.cap} = engine.guard.defer_cap, #944's UNRESOLVED_DEFER_CAP; laps, not "
            f"seconds) because its row names {len(missing)} rid(s) this rank cannot locate, "
            f"unchanged: rids={missing} (a rid retracted after the row was sealed, or a "
            "resident re-admitted rank-locally); engine.admission.row_probe=stop stops at once"
        )
        return Verdict(False, False, n, why)
