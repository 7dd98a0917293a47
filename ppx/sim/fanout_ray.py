"""Fan-out on a Ray cluster: an exploration's shards as Ray tasks (`explore.ray=ADDRESS`).

Beside fanout.py's forked workers and the submitit launcher: the same shards (shard.py), the
same merge, so `explore.workers=N` and `explore.ray=... explore.workers=N` give the same
exploration. ADDRESS is `local` (start a head in this process, one CPU per worker), `auto`
(the cluster `ray start` put on this machine) or `ray://HOST:PORT`. Only the `ray` package
is used (the Hydra Ray launcher pins a cloudpickle that conflicts with the rest of ppx).
"""

from __future__ import annotations

import os
import sys

from ppx.sim.shard import ShardResult, run_shard


def connect(address: str, workers: int) -> None:
    """One connection per process; `local` starts a private head sized to the workers."""
    if address == "local":
        # a private head on this machine: no token to mint and store, and a raylet that may
        # take a while to register on a loaded machine (read when ray is imported)
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    import ray

    if ray.is_initialized():
        return
    # the tasks import ppx: a worker starts where this process runs, with its import path
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}}
    kw = dict(include_dashboard=False, log_to_driver=False, runtime_env=env)
    if address == "local":
        ray.init(num_cpus=workers, **kw)
    else:
        ray.init(address=address, **kw)


def _shard(cfg, shard: int, shards: int) -> ShardResult:
    import io

    import torch

    torch.set_num_threads(1)  # as every rank and every forked worker runs
    return run_shard(cfg, shard, shards, lambda s: None, io.StringIO())


def run_ray(cfg, workers: int, address: str) -> list[ShardResult]:
    """The N shards as N Ray tasks (one CPU each); results in shard order."""
    import ray

    connect(address, workers)
    task = ray.remote(num_cpus=1)(_shard)
    return ray.get([task.remote(cfg, w, workers) for w in range(workers)])
