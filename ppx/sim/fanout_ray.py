"""Fan-out on a Ray cluster: an exploration's shards as Ray tasks (`explore.fanout.ray=ADDRESS`).

Beside fanout.py's forked workers and the submitit launcher: the same shards (shard.py), the
same merge, so `explore.fanout.workers=N` and `explore.fanout.ray=... explore.fanout.workers=N` give the same
exploration. The cluster (ADDRESS `local`, `auto`, `HOST:PORT`, `ray://HOST:PORT`) is
ppx/launch/ray_cluster.py's.
"""

from __future__ import annotations

import io

import torch

from ppx.launch.ray_cluster import cluster
from ppx.sim.shard import ShardResult, run_shard


def _shard(cfg, shard: int, shards: int) -> ShardResult:
    torch.set_num_threads(1)  # as every rank and every forked worker runs
    return run_shard(cfg, shard, shards, lambda s: None, io.StringIO())


def run_ray(cfg, workers: int, address: str) -> list[ShardResult]:
    """The N shards as N Ray tasks (one CPU each); results in shard order."""
    import ray

    with cluster(address, workers):
        task = ray.remote(num_cpus=1)(_shard)
        return ray.get([task.remote(cfg, w, workers) for w in range(workers)])
