"""Run many schedules of one composed engine on the simulator and keep what failed.

Each schedule is a whole run (every rank, the frontend) under one strategy instance; nothing
is written per run. For the first failure of each distinct verdict / cycle the explorer saves
`failures/<n>/schedule.txt` and prints the command that replays it as a full run (run store,
post-mortem, W&B) with `python -m ppx.run ... explore.replay=PATH`.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass, field

import pandas as pd
from omegaconf import OmegaConf

from ppx.sim.schedule import Schedule, config_hash, save
from ppx.sim.strategy import DfsFrontier, PctStrategy, PrefixStrategy, RandomStrategy
from ppx.sim.world import SimSupervisor

COLUMNS = ["schedule", "verdict", "reason", "cycle", "tokens", "served", "steps", "virtual_s"]


@dataclass
class Exploration:
    rows: list[dict] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # failure key -> schedule path
    covered: int = 0  # dfs: schedules of the bounded tree covered
    exhausted: bool | None = None  # dfs: the whole bounded tree was covered
    wall_s: float = 0.0

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)


def failure_key(verdict: str, reason: str, cycle: str | None) -> str:
    """Failures are told apart by verdict and cycle (or the reason with numbers blanked)."""
    what = cycle or re.sub(r"\d+", "#", reason or "")[:120]
    return f"{verdict}: {what}"


def replay_command(overrides: list[str], path: str) -> str:
    kept = [o for o in overrides if not o.startswith(("explore.", "hydra."))]
    if not any(o.startswith("engine.transport=") for o in kept):
        kept.append("engine.transport=sim")
    return " ".join(["python -m ppx.run", *kept, f"explore.replay={path}"])


def explore(cfg, out_dir: str, overrides: list[str], echo=print) -> Exploration:
    x = cfg.explore
    n, seed0, world = int(x.schedules), int(x.seed), int(cfg.pp)
    digest = config_hash(cfg)
    frontier = DfsFrontier(int(x.bound)) if x.strategy == "dfs" else None
    ex = Exploration()
    typed, models = OmegaConf.to_object(cfg), {}
    os.makedirs(out_dir, exist_ok=True)
    log = open(os.path.join(out_dir, "ranks.log"), "w")
    t0 = time.time()
    for i in range(n):
        if frontier is not None:
            if frontier.exhausted:
                break
            strategy = PrefixStrategy(frontier.next_prefix)
        elif x.strategy == "pct":
            strategy = PctStrategy(seed0 + i, int(x.depth), world + 1, int(x.horizon))
        else:
            strategy = RandomStrategy(seed0 + i)
        sup = SimSupervisor(cfg, None, strategy, typed, models)
        with contextlib.redirect_stderr(log):  # the ranks' warnings: ranks.log, not the screen
            out = sup.run()
        if frontier is not None:
            frontier.record(strategy.taken)
        cycle = (out.get("postmortem") or {}).get("cycle")
        row = {
            "schedule": i,
            "verdict": out["verdict"],
            "reason": out["reason"],
            "cycle": cycle,
            "tokens": sup.driver.tokens,
            "served": sup.driver.count("served"),
            "steps": out["sim"]["steps"],
            "virtual_s": out["sim"]["virtual_s"],
        }
        ex.rows.append(row)
        key = failure_key(out["verdict"], out["reason"], cycle)
        if out["verdict"] != "served" and key not in ex.failures:
            d = os.path.join(out_dir, "failures", str(len(ex.failures)))
            os.makedirs(d, exist_ok=True)
            path = os.path.abspath(os.path.join(d, "schedule.txt"))
            save(
                path,
                Schedule(
                    digest, overrides, str(x.strategy), seed0 + i, out["verdict"], sup.sched.choices
                ),
            )
            ex.failures[key] = path
            echo(f"ppx.explore: schedule {i}: {key}")
            echo(f"  replay: {replay_command(overrides, path)}")
        if (i + 1) % int(x.batch) == 0 or i + 1 == n:
            counts = pd.Series([r["verdict"] for r in ex.rows]).value_counts().to_dict()
            rate = (i + 1) / max(time.time() - t0, 1e-9)
            echo(f"ppx.explore: {i + 1}/{n} schedules {counts} ({rate:.1f} schedules/s)")
    ex.wall_s = time.time() - t0
    log.close()
    if frontier is not None:
        ex.covered, ex.exhausted = frontier.covered, frontier.exhausted
    return ex


def summary_of(ex: Exploration, cfg, exp: str | None) -> dict:
    """The exploration as one summary.json row: fractions per verdict, the most common
    cycle, the config choices (so a study cell of explorations loads like a run)."""
    from ppx.telemetry.summary import choices_of

    df = ex.table
    n = len(df)
    counts = df["verdict"].value_counts().to_dict() if n else {}
    cycles = df["cycle"].dropna()
    top = counts and max(counts, key=counts.get)
    s = {
        "verdict": "served" if n and counts.get("served", 0) == n else top or "none",
        "reason": f"{n} schedules: {counts}",
        "explored": n,
        "schedules_per_s": round(n / ex.wall_s, 2) if ex.wall_s else None,
        "cycle": cycles.value_counts().index[0] if len(cycles) else None,
        "failures": ex.failures,
        "dfs_covered": ex.covered if ex.exhausted is not None else None,
        "dfs_exhausted": ex.exhausted,
        "wall_s": round(ex.wall_s, 3),
        "choices": choices_of(cfg, exp) | {"strategy": str(cfg.explore.strategy)},
        "study": cfg.logger.group,
    }
    for v in ("served", "wedged", "livelocked", "stopped", "crashed", "timeout", "dead_peer"):
        s[f"frac_{v}"] = round(counts.get(v, 0) / n, 4) if n else None
    return s
