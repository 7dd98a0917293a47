"""The metrics timeline: one row per rank and one group row (rank -1) per sample, read off the
board, so a run that dies mid-way still has its curve up to the end."""

from __future__ import annotations

from ppx.engine.board import Board, F


def sample(
    board: Board, world: int, t_s: float, tokens: int, finished: int, rows: list[dict]
) -> None:
    """Append the rows of one sample at run time `t_s` to `rows`. The group row's throughput is
    measured since the previous group row (rank 0 speaks for the group's phase, voids and flips:
    rank 0 decides them)."""
    group = {
        "t_s": t_s,
        "rank": -1,
        "phase": "pp",
        "epoch": 0,
        "passes": 0,
        "tokens": tokens,
        "finished": finished,
        "voids": 0,
        "flips": 0,
        "retractions": 0,
    }
    last = next((m for m in reversed(rows) if m["rank"] == -1), None)
    for r in range(world):
        f = board.fields(r)
        row = {
            "t_s": t_s,
            "rank": r,
            "phase": "tp" if int(f[F.PHASE]) else "pp",
            "epoch": int(f[F.EPOCH]),
            "passes": int(f[F.PASS]),
            "tokens": int(f[F.TOKENS]),
            "finished": int(f[F.FINISHED]),
            "voids": int(f[F.VOIDS]),
            "flips": int(f[F.FLIPS]),
            "retractions": int(f[F.RETRACTIONS]),
            "out_tok_s": 0.0,
        }
        rows.append(row)
        group["passes"] += row["passes"]
        group["retractions"] += row["retractions"]
        if r == 0:
            group.update(
                phase=row["phase"], epoch=row["epoch"], voids=row["voids"], flips=row["flips"]
            )
    dt = t_s - last["t_s"] if last else t_s
    group["out_tok_s"] = (tokens - (last["tokens"] if last else 0)) / dt if dt > 0 else 0.0
    rows.append(group)
