"""A Ray cluster for ppx's fan-outs (explorer shards, study cells): one connection per process,
and a private local head that starts lean and leaves nothing behind.

ADDRESS is `local` (a head in this process for the duration of the work, one CPU per task),
`auto` (the cluster `ray start` put on this machine), `HOST:PORT` or `ray://HOST:PORT`. Only
the `ray` package is used: the Hydra Ray launcher pins a cloudpickle the rest of ppx cannot
take. ray is imported here, never at ppx's import time (it is an optional extra).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from ppx.launch.children import descendants, kill_new

# A raylet waits a hard-coded 15 s for its dashboard agent's port file and dies when the agent
# (a Python process importing ray) is slower, which a loaded small machine makes it
# (ray-project/ray#65983; giving the agents fixed ports does not help: the raylet waits for
# the listen port's file whatever it is given). The head is started again, this many times.
HEAD_TRIES = 3


def _start_head(cpus: int):
    from ray.cluster_utils import Cluster

    before = descendants()
    for attempt in range(1, HEAD_TRIES + 1):
        try:
            return Cluster(
                initialize_head=True,
                # nothing a batch of tasks needs: no dashboard, autoscaler monitor or log
                # monitor (each one more Python process importing ray, slowing the agents)
                head_node_args=dict(
                    num_cpus=cpus, include_dashboard=False, no_monitor=True,
                    include_log_monitor=False,
                ),
                shutdown_at_exit=True,
            )  # fmt: skip
        except Exception as e:  # ray raises a bare Exception for a node that did not start
            kill_new(before)  # its GCS and agents, which ray would end only at exit
            if attempt == HEAD_TRIES:
                raise
            print(f"ppx: ray head did not start ({e}); try {attempt + 1}/{HEAD_TRIES}",
                  file=sys.stderr, flush=True)  # fmt: skip


@contextlib.contextmanager
def local_head(cpus: int) -> Iterator[str]:
    """A head node on this machine with `cpus` worker CPUs (Ray runs one worker process per
    CPU a task holds); yields its address, and on exit disconnects and stops every process
    it started (raylet, GCS, agents, workers)."""
    # a private head: no token to mint and store (read when ray is first imported)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    head = _start_head(cpus)
    try:
        yield head.address
    finally:
        ray.shutdown()
        head.shutdown()


def address_problem(address: str) -> str | None:
    """Why `address` names no Ray cluster ppx can join, in one line (None: it may), checked
    before anything runs; whether a cluster answers there is Ray's to say."""
    import importlib.util
    import re

    if importlib.util.find_spec("ray") is None:
        return f"ray={address} needs the ray package (pip install -e '.[ray]')"
    if address in ("local", "auto") or re.fullmatch(r"(ray://)?[\w.\-\[\]:]+:\d+", address):
        return None
    return f"ray={address!r}: local | auto | HOST:PORT | ray://HOST:PORT"


def connect(address: str) -> None:
    """Join the cluster at `address` unless this process already has. No runtime_env: the
    workers import ppx from the environment their node started in (a local head inherits
    this process's, PYTHONPATH included; a remote cluster has ppx installed), and the ones
    the raylet prestarts for the job take the tasks at once; a runtime_env would make it
    start fresh ones per task (19 s against 0.9 s for two trivial tasks at load ~10)."""
    import ray

    if ray.is_initialized():
        return
    ray.init(address=address, include_dashboard=False, log_to_driver=False)


@contextlib.contextmanager
def cluster(address: str, cpus: int) -> Iterator[None]:
    """Connected to `address` for the block; `local`: a private head of `cpus` CPUs, stopped
    after it."""
    if address != "local":
        connect(address)
        yield
        return
    with local_head(cpus) as head:
        connect(head)
        yield
