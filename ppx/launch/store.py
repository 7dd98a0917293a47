"""Ranks under torchrun: what crosses nodes goes through torchrun's own c10d store.

`torchrun --nnodes=N --nproc-per-node=M --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT -m
ppx.run ...` starts one worker per rank. Each worker spawns its rank process as the
single-machine supervisor does (same `rank_main`, same node-local status board); the rank
processes rendezvous for gloo through the store torchrun's agents already share
(MASTER_ADDR:MASTER_PORT), under a per-run prefix. Global rank 0's worker is the supervisor.
Every other worker is a node agent (ppx/launch/node.py) that publishes its rank's board row,
report, events and (on request) stacks to the store; the supervisor's `Mirror` copies them
into its own board and run dir, so the watchdog, the wait-for graph and the post-mortem read
remote ranks exactly as local ones. No socket of ppx's own.

Keys under the prefix: `t0`; `board/{r}` (publisher's monotonic ns + the row);
`report/{r}`, `events/{r}`, `stack/{r}`, `exit/{r}` (from the agents); `cmd/stacks` (a
counter) and `cmd/finish` (from the supervisor).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import numpy as np

STORE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class TorchrunEnv:
    rank: int
    world: int
    local_rank: int
    node: int
    host: str
    port: int
    run_id: str

    @property
    def prefix(self) -> str:
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        return f"ppx/{self.run_id}/{restart}/"


def torchrun_env() -> TorchrunEnv | None:
    """The torchrun worker's identity, or None for the single-machine spawn."""
    e = os.environ
    if "TORCHELASTIC_RUN_ID" not in e or "RANK" not in e:
        return None
    return TorchrunEnv(
        rank=int(e["RANK"]),
        world=int(e["WORLD_SIZE"]),
        local_rank=int(e.get("LOCAL_RANK", 0)),
        node=int(e.get("GROUP_RANK", 0)),
        host=e["MASTER_ADDR"],
        port=int(e["MASTER_PORT"]),
        run_id=e["TORCHELASTIC_RUN_ID"],
    )


@dataclass(frozen=True)
class StoreSpec:
    """How a process (a rank, spawned) reaches the run's part of torchrun's store."""

    host: str
    port: int
    prefix: str

    def connect(self, timeout_s: float = STORE_TIMEOUT_S):
        import torch.distributed as dist

        base = dist.TCPStore(
            self.host,
            self.port,
            is_master=False,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        return dist.PrefixStore(self.prefix, base)


def spec_of(env: TorchrunEnv) -> StoreSpec:
    return StoreSpec(env.host, env.port, env.prefix)


def has(store, key: str) -> bool:
    return bool(store.check([key]))


def get_text(store, key: str) -> str:
    return store.get(key).decode()


def pack_row(row: np.ndarray, mono_ns: int) -> bytes:
    return np.concatenate([np.array([mono_ns], dtype=np.int64), row]).tobytes()


def unpack_row(blob: bytes) -> tuple[int, np.ndarray]:
    arr = np.frombuffer(blob, dtype=np.int64)
    return int(arr[0]), arr[1:]
