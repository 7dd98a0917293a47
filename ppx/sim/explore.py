"""Run many schedules of one composed engine on the simulator and keep what failed.

Each schedule is a whole run (every rank, the frontend) under one strategy instance, judged
by its verdict and by the oracle (a served run with a wrong token is `mismatch`); nothing is
written per run. The first failure of each distinct verdict / cycle is shrunk (shrink.py)
and saved as `failures/<n>/schedule.txt` (with `original.txt`, as found), with the command
that replays it as a full run (run store, post-mortem, W&B):
`python -m ppx.run ... explore.replay=PATH`.

Schedules are sharded (shard.py): over `explore.workers` local processes (fanout.py), or one
shard per launcher job (`explore.shard` of `explore.shards`, merged by fanout.MergeShards).
"""

from __future__ import annotations

import os
import time

from ppx.sim.merge import Exploration, merge
from ppx.sim.registry import strategy_of
from ppx.sim.report import finish, summary_dict
from ppx.sim.schedule import config_hash, resolved_config
from ppx.sim.shard import run_shard


def explore(
    cfg, out_dir: str, overrides: list[str], echo=print, config_name: str = "config"
) -> Exploration:
    """Explore, write the table and the failures into `out_dir`, return the exploration."""
    x = cfg.explore
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.time()
    if strategy_of(x).exhaustive:  # one walk, one process (exhaustive_run.py)
        from ppx.sim.exhaustive_run import search
        from ppx.sim.liveness_report import write

        with open(os.path.join(out_dir, "ranks.log"), "w") as log:
            ex = search(cfg, echo, log)
        if ex.dfs and ex.dfs.get("livelock"):  # the fair cycles' states, beside summary.json
            write(out_dir, ex.dfs["livelock"])
        return finish(ex, config_hash(cfg), out_dir, echo, overrides, config_name)
    if int(x.shards) > 1:  # a launcher job: this process is one shard of the sweep
        results = [_one(cfg, int(x.shard), int(x.shards), echo, out_dir)]
    elif x.get("ray"):  # the shards as tasks on a Ray cluster (fanout_ray.py)
        from ppx.sim.fanout_ray import run_ray

        results = run_ray(cfg, max(1, int(x.workers)), str(x.ray))
    elif int(x.workers) > 1:
        from ppx.sim.fanout import run_local

        results = run_local(cfg, int(x.workers), out_dir)
    else:
        results = [_one(cfg, 0, 1, echo, out_dir)]
    ex = merge(results, time.time() - t0)
    ex.config = resolved_config(cfg)
    return finish(ex, config_hash(cfg), out_dir, echo, overrides, config_name)


def _one(cfg, shard: int, shards: int, echo, out_dir: str):
    with open(os.path.join(out_dir, "ranks.log"), "w") as log:
        return run_shard(cfg, shard, shards, echo, log)


def summary_of(ex: Exploration, cfg, exp: str | None) -> dict:
    """The exploration as one summary.json row (so a study cell of explorations loads like
    a run): counts and fractions per verdict, the tokens the oracle checked, the most common
    cycle, the config choices."""
    from ppx.telemetry.summary import choices_of

    choices = choices_of(cfg, exp) | {"strategy": str(cfg.explore.strategy)}
    s = summary_dict(ex, choices, cfg.logger.group)
    if strategy_of(cfg.explore).exhaustive:
        from ppx.sim.exhaustive_run import summary_keys

        s |= summary_keys(ex)
    return s
