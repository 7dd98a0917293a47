"""What an exploration leaves: the table and failures written, the replay command of each
failure, the summary row (shared by a one-process exploration and the merge of launcher
shards, fanout.MergeShards)."""

from __future__ import annotations

import json
from collections import Counter

from ppx.sim.merge import Exploration, write

VERDICTS = ("served", "wedged", "livelocked", "stopped", "crashed", "timeout", "dead_peer")


# explore keys that shape a run (kept in a replay command); the rest choose the schedules
RUN_KEYS = ("explore.clock=", "explore.step_us=", "explore.max_steps=")


def replay_command(overrides: list[str], path: str, config_name: str = "config") -> str:
    kept = [
        o for o in overrides
        if o.startswith(RUN_KEYS) or not o.startswith(("explore.", "hydra.", "hydra/"))
    ]  # fmt: skip
    if not any(o.startswith("engine.transport=") for o in kept):
        kept.append("engine.transport=sim")
    head = ["python -m ppx.run"]
    if config_name != "config":  # the explorer's own defaults (conf/explorer.yaml)
        head.append(f"--config-name {config_name}")
    return " ".join([*head, *kept, f"explore.replay={path}"])


def finish(
    ex: Exploration, digest: str, out_dir: str, echo, overrides: list[str], config_name: str
) -> Exploration:
    write(ex, out_dir, digest, overrides)
    for n, (key, path) in enumerate(ex.paths.items()):
        f = ex.failures[key]
        sh = f.shrink or {}
        what = ""
        if sh:
            (d0, d1), (c0, c1) = sh["delays"], sh["choice_points"]
            what = f", shrunk: {d0} -> {d1} delays, {c0} -> {c1} choice points"
        echo(f"ppx.explore: failure {n}: schedule {f.index} ({f.strategy}{what}): {key}")
        echo(f"  replay: {replay_command(overrides, path, config_name)}")
    return ex


def summary_dict(ex: Exploration, choices: dict, study) -> dict:
    df = ex.table
    n = len(df)
    counts = {k: int(v) for k, v in Counter(df["verdict"]).items()}
    cycles = df["cycle"].dropna()
    top = counts and max(counts, key=counts.get)
    s = {
        "schedules": n,
        "wall_s": round(ex.wall_s, 3),
        "schedules_per_s": round(n / ex.wall_s, 2) if ex.wall_s else None,
        "verdicts": counts,
        "tokens_checked": int(df["tokens_checked"].sum()) if n else 0,
        "failures": {k: ex.paths.get(k) for k in ex.failures},
        "workers": ex.workers,
        "verdict": "served" if n and counts.get("served", 0) == n else top or "none",
        "reason": f"{n} schedules: {counts}",
        "explored": n,
        "cycle": cycles.value_counts().index[0] if len(cycles) else None,
        "dfs": ex.dfs,
        "dfs_covered": ex.covered if ex.exhausted is not None else None,
        "dfs_exhausted": ex.exhausted,
        "choices": choices,
        "study": study,
    }
    for v in (*VERDICTS, "mismatch"):
        s[f"frac_{v}"] = round(counts.get(v, 0) / n, 4) if n else None
    return s


def write_summary(path: str, summary: dict) -> None:
    with open(path, "w") as f:
        json.dump(summary, f, indent=1, default=str)
