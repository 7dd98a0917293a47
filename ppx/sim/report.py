"""What an exploration leaves: the table and failures written, the replay command of each
failure, the summary row (shared by a one-process exploration and the merge of launcher
shards, fanout.MergeShards)."""

from __future__ import annotations

import json
from collections import Counter

from ppx.sim.merge import Exploration, write

VERDICTS = (
    "served",
    "wedged",
    "livelocked",
    "lost",
    "stalled",
    "stopped",
    "crashed",
    "timeout",
    "dead_peer",
)


# the explore key that shapes a run (kept in a replay command); the rest choose the schedules
RUN_KEYS = ("explore.clock=",)


def replay_overrides(overrides: list[str]) -> list[str]:
    """What recomposes a schedule's run: its overrides less the exploring ones, on the
    simulator (the explorer sets the transport itself, so its overrides may not say it)."""
    kept = [
        o for o in overrides
        if o.startswith(RUN_KEYS) or not o.startswith(("explore.", "hydra.", "hydra/"))
    ]  # fmt: skip
    if not any(o.startswith("engine.transport=") for o in kept):
        kept.append("engine.transport=sim")
    return kept


def replay_command(overrides: list[str], path: str, config_name: str = "config") -> str:
    kept = replay_overrides(overrides)
    head = ["python -m ppx.run"]
    if config_name != "config":  # the explorer's own defaults (conf/explorer.yaml)
        head.append(f"--config-name {config_name}")
    return " ".join([*head, *kept, f"explore.replay={path}"])


def replay_file_command(path: str) -> str:
    """The schedule file alone replays: its header holds the config (ppx/replay.py)."""
    return f"python -m ppx.replay {path}"


def failure_counts(ex: Exploration) -> dict[str, int]:
    """Schedules that hit each failure key (one bug, one key, however many schedules)."""
    from ppx.sim.runner import failure_key

    df = ex.table
    # pandas reads a served row's missing cycle (or reason) as NaN, a float that is truthy
    texts = [[x if isinstance(x, str) else None for x in df[c]] for c in ("reason", "cycle")]
    keys = [failure_key(v, r, c) for v, r, c in zip(df["verdict"], *texts)]
    return {k: keys.count(k) for k in ex.failures}


def finish(
    ex: Exploration, digest: str, out_dir: str, echo, overrides: list[str], config_name: str
) -> Exploration:
    write(ex, out_dir, digest, overrides, config_name)
    hits = failure_counts(ex)
    for n, (key, path) in enumerate(ex.paths.items()):
        f = ex.failures[key]
        sh = f.shrink or {}
        what = ""
        if sh:
            (d0, d1), (c0, c1) = sh["delays"], sh["choice_points"]
            what = f", shrunk: {d0} -> {d1} delays, {c0} -> {c1} choice points"
        # a fair cycle (exhaustive_run.livelocks) is no row of the table: its pumped lasso
        where = f"{hits.get(key, 1)} schedule(s), first {f.index}" if f.index >= 0 else "a lasso"
        echo(f"ppx.explore: failure {n}: {where} ({f.strategy}{what}): {key}")
        echo(f"  replay: {replay_file_command(path)}")
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
        "failure_counts": failure_counts(ex) if n else {},
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
