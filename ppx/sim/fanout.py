"""Fan-out: the shards of one exploration on local processes, or as launcher jobs.

`explore.fanout.workers=N`: N processes forked from this one (the imports, the composed config and
nothing else are inherited: each builds its own runner), shard w in worker w; the results
come back over a pipe and merge here. One torch thread per worker, as every rank runs.

`python -m ppx.explore -m explore.fanout.shards=N explore.fanout.shard=0,...,N-1 hydra/launcher=...`: each
Hydra job is one shard and writes its directory; `MergeShards`, a Hydra callback the
explorer's config installs, merges the jobs' directories into the sweep directory when the
multirun ends (locally with submitit_local or joblib, on a cluster with submitit_slurm).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys

import torch
from hydra.experimental.callback import Callback

from ppx.sim.shard import ShardResult, run_shard


def _worker(cfg, shard: int, shards: int, log_path: str) -> ShardResult:
    torch.set_num_threads(1)
    with open(log_path, "w") as log:
        return run_shard(cfg, shard, shards, lambda s: print(s, flush=True), log)


def run_local(cfg, workers: int, out_dir: str) -> list[ShardResult]:
    """The N shards on N forked processes; results in shard order."""
    torch.set_num_threads(1)  # before the fork: no OpenMP pool the children would inherit
    sys.stdout.flush()
    ctx = mp.get_context("fork")
    args = [(cfg, w, workers, os.path.join(out_dir, f"ranks.{w}.log")) for w in range(workers)]
    with ctx.Pool(workers) as pool:
        return pool.starmap(_worker, args)


class MergeShards(Callback):
    """After a multirun of explorer shards: one exploration in the sweep directory."""

    def on_multirun_end(self, config, **kwargs) -> None:
        if int(config.explore.fanout.shards) <= 1:
            return  # a sweep of other keys: each job is a whole exploration
        from ppx.sim.merge import merge, read_shard
        from ppx.sim.report import finish, summary_dict, write_summary

        sweep = str(config.hydra.sweep.dir)
        sums, shards = [], []
        for j in sorted((d for d in os.listdir(sweep) if d.isdigit()), key=int):
            path = os.path.join(sweep, j, "summary.json")
            if not os.path.exists(path):
                continue
            with open(path) as fh:
                sums.append(json.load(fh))
            shards.append(read_shard(os.path.join(sweep, j), int(sums[-1]["shard"])))
        got, want = sorted(s.shard for s in shards), list(range(int(config.explore.fanout.shards)))
        if got != want:
            print(f"ppx.explore: merge: shards {got} of {want} wrote a summary; not merged",
                  file=sys.stderr)  # fmt: skip
            return
        # the jobs' span: side by side on a cluster, one after another on a small machine
        wall = max(s["t_end"] for s in sums) - min(s["t_start"] for s in sums)
        ex = merge(shards, wall)
        first = sums[0]
        overrides = [o for o in first["overrides"] if not o.startswith("explore.fanout.shard=")]
        finish(ex, first["config_hash"], sweep, print, overrides, first["config_name"])
        s = summary_dict(ex, first["choices"], first["study"])
        write_summary(os.path.join(sweep, "summary.json"), s)
        print(f"ppx.explore: merged {len(shards)} shards in {sweep}: {s['reason']}", flush=True)
