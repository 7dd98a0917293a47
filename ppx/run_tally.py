"""What a run's supervisor keeps and hands run.py, whether its ranks are processes
(ppx/supervisor.py) or tasks of the simulator (ppx/sim/world.py): the metrics sampled off the
board, the ranks' reports, and the raw outcome built from the board's totals. Both
supervisors hold one; neither is the other's subclass."""

from __future__ import annotations

from dataclasses import dataclass, field

from ppx.engine.board import F
from ppx.watch.sampler import sample


@dataclass
class RunTally:
    world: int
    metrics: list[dict] = field(default_factory=list)
    reports: dict[int, dict] = field(default_factory=dict)

    def sample(self, board, t_s: float, driver) -> None:
        """One metrics row per rank at `t_s` on the run's clock."""
        served = driver.count("served")
        sample(board, self.world, round(t_s, 3), driver.stream.tokens, served, self.metrics)

    def outcome(
        self, board, verdict: str, reason: str, pm: dict | None, boot_s: float | None
    ) -> dict:
        """The raw outcome run.py turns into the store (the board's totals included)."""
        f = [board.fields(r) for r in range(self.world)]
        return {
            "verdict": verdict,
            "reason": reason,
            "postmortem": pm,
            "boot_s": boot_s,
            "passes": max(int(x[F.PASS]) for x in f),
            "max_inflight": max(int(x[F.MAX_INFLIGHT]) for x in f),
            # what each rank counted on its board row: the summary's word for a rank that
            # left no report (killed while blocked on a peer that had stopped the run)
            "board_counts": [
                {
                    "voids": int(x[F.VOIDS]),
                    "retracted": int(x[F.RETRACTIONS]),
                    "flips": int(x[F.FLIPS]),
                }
                for x in f
            ],
        }
