"""Shards into one exploration, and an exploration onto disk.

Rows are ordered by schedule index; a failure found by several shards keeps the one with the
lowest index (the run the same exploration on one worker would have saved); dfs counts add
up, and the tree is exhausted only when every shard's part of it is. What is written: the
table (explore.parquet), and per failure key `failures/<n>/schedule.txt` (shrunk),
`original.txt` (as found) and `failure.json` (key, index, verdict, reason, shrink counts).
A shard on disk is such a directory too, so a launcher's jobs merge from their directories.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import pandas as pd

from ppx.sim.runner import COLUMNS
from ppx.sim.schedule import Schedule, load, save
from ppx.sim.shard import Failure, ShardResult


@dataclass
class Exploration:
    rows: list[dict] = field(default_factory=list)
    failures: dict[str, Failure] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)  # failure key -> saved schedule
    dfs: dict | None = None
    wall_s: float = 0.0
    workers: int = 1
    config: dict | None = None  # the resolved config, into every saved schedule's header

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)

    # the dfs counts as the summary names them
    @property
    def covered(self) -> int:
        return self.dfs["runs"] if self.dfs else 0

    @property
    def exhausted(self) -> bool | None:
        return self.dfs["exhausted"] if self.dfs else None


def merge(shards: list[ShardResult], wall_s: float) -> Exploration:
    ex = Exploration(wall_s=wall_s, workers=len(shards))
    for s in shards:
        ex.rows += s.rows
        for key, f in s.failures.items():
            if key not in ex.failures or f.index < ex.failures[key].index:
                ex.failures[key] = f
        if s.dfs is not None:
            d = ex.dfs or {"runs": 0, "blocked": 0, "skipped": 0, "exhausted": True}
            for k in ("runs", "blocked", "skipped"):
                d[k] += s.dfs[k]
            d["exhausted"] = d["exhausted"] and s.dfs["exhausted"]
            ex.dfs = d
    ex.rows.sort(key=lambda r: r["schedule"])
    ex.failures = dict(sorted(ex.failures.items(), key=lambda kv: kv[1].index))
    return ex


def write(
    ex: Exploration, out_dir: str, digest: str, overrides: list[str], config_name: str = "config"
) -> None:
    """The table and every failure's schedules (sets `ex.paths`)."""
    os.makedirs(out_dir, exist_ok=True)
    ex.table.to_parquet(os.path.join(out_dir, "explore.parquet"), index=False)
    for n, (key, f) in enumerate(ex.failures.items()):
        d = os.path.join(out_dir, "failures", str(n))
        os.makedirs(d, exist_ok=True)
        path = os.path.abspath(os.path.join(d, "schedule.txt"))
        head = dict(config_name=config_name, config=ex.config)
        why = f.shrunk_reason or f.reason  # the shrunk run's own reason (its step counts)
        save(
            path,
            Schedule(
                digest, overrides, f.strategy, f.seed, f.verdict, f.choices, **head, reason=why
            ),
        )
        save(
            os.path.join(d, "original.txt"),
            Schedule(
                digest,
                overrides,
                f.strategy,
                f.seed,
                f.verdict,
                f.original,
                **head,
                reason=f.reason,
            ),
        )
        meta = {k: getattr(f, k) for k in ("key", "index", "strategy", "seed", "verdict")}
        meta |= {"reason": f.reason, "shrink": f.shrink}
        with open(os.path.join(d, "failure.json"), "w") as fh:
            json.dump(meta, fh, indent=1)
        ex.paths[key] = path
    if ex.dfs is not None:
        with open(os.path.join(out_dir, "dfs.json"), "w") as fh:
            json.dump(ex.dfs, fh)


def read_shard(job_dir: str, shard: int) -> ShardResult:
    """A shard written by `write` (one launcher job's directory)."""
    out = ShardResult(shard)
    out.rows = pd.read_parquet(os.path.join(job_dir, "explore.parquet")).to_dict("records")
    fail_dir = os.path.join(job_dir, "failures")
    for n in sorted(os.listdir(fail_dir), key=int) if os.path.isdir(fail_dir) else []:
        d = os.path.join(fail_dir, n)
        with open(os.path.join(d, "failure.json")) as fh:
            m = json.load(fh)
        shrunk, original = (
            load(os.path.join(d, "schedule.txt")),
            load(os.path.join(d, "original.txt")),
        )
        out.failures[m["key"]] = Failure(
            m["key"], m["index"], m["strategy"], m["seed"], m["verdict"], m["reason"],
            original.choices, shrunk.choices, m["shrink"], shrunk.reason,
        )  # fmt: skip
    dfs = os.path.join(job_dir, "dfs.json")
    if os.path.exists(dfs):
        with open(dfs) as fh:
            out.dfs = json.load(fh)
    with open(os.path.join(job_dir, "summary.json")) as fh:
        out.wall_s = float(json.load(fh)["wall_s"])
    return out
