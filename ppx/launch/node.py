"""A torchrun worker for a rank other than global rank 0: the node agent.

It spawns its rank process exactly as the single-machine supervisor does (`rank_main`, a
node-local board), then publishes that rank's board row, and at the end its report, event
log and exit code, through the c10d store; on the supervisor's request it dumps the rank's
stacks (faulthandler, py-spy when present) into the store. It leaves when its rank has left
and the supervisor said `finish`, or when the store is gone (rank 0's node ended or died);
its rank never outlives it (PR_SET_PDEATHSIG), and it never outlives its torchrun agent.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time

from omegaconf import OmegaConf

from ppx.engine.board import Board
from ppx.engine.process import die_with_parent, rank_main
from ppx.engine.rank import RankArgs
from ppx.launch.mirror import pull_row
from ppx.launch.store import TorchrunEnv, get_text, has, pack_row, spec_of
from ppx.watch.postmortem import pyspy_dump

PUBLISH_S = 0.1
FINISH_WAIT_S = 60.0


def _stacks(p, stack_path: str) -> str:
    os.kill(p.pid, signal.SIGUSR1)
    time.sleep(0.5)
    text = open(stack_path).read() if os.path.exists(stack_path) else ""
    spy = pyspy_dump(p.pid)
    if spy is not None:
        text += "\n--- py-spy dump --native ---\n" + spy
    return text


def serve_node(cfg, run_dir: str, env: TorchrunEnv) -> int:
    die_with_parent()  # killing this node's torchrun kills its agent, and so its rank
    r, spec = env.rank, spec_of(env)
    local = os.path.join(run_dir, "nodes", f"rank{r}")  # this node's own files
    os.makedirs(os.path.join(local, "ranks"), exist_ok=True)
    with open(os.path.join(local, "node.json"), "w") as f:  # who is where, for operators
        json.dump(
            {"rank": r, "node": env.node, "pid": os.getpid(), "torchrun_pid": os.getppid()}, f
        )
    store = spec.connect()
    t0 = float(get_text(store, "t0"))  # blocks until the supervisor is up (store timeout)
    board_path = os.path.join(local, "ranks", "board.bin")
    board = Board(board_path, env.world, create=True)
    a = RankArgs(r, env.world, 0, local, board_path, OmegaConf.to_object(cfg), t0, store=spec)
    p = mp.get_context("spawn").Process(target=rank_main, args=(a,), name=f"ppx-rank{r}")
    p.start()
    stack_path = os.path.join(local, "ranks", f"rank{r}.stack.txt")
    served_stacks = 0
    try:
        stamps: dict[int, int] = {}
        while p.exitcode is None:
            store.set(f"board/{r}", pack_row(board.arr[r], time.monotonic_ns()))
            for q in range(env.world):  # the peers' rows: their counters, for our rank
                if q != r:
                    pull_row(store, board, q, stamps)
            asked = int(store.add("cmd/stacks", 0))
            if asked > served_stacks:
                store.set(f"stack/{r}", f"{asked}\n{_stacks(p, stack_path)}")
                served_stacks = asked
            if has(store, "cmd/finish"):
                break
            p.join(PUBLISH_S)
        if p.exitcode is None:  # the supervisor ended the run: teardown, as on one machine
            p.terminate()
            p.join(2.0)
            if p.is_alive():
                p.kill()
            p.join()
        store.set(f"board/{r}", pack_row(board.arr[r], time.monotonic_ns()))
        for key, name in (("report", f"rank{r}.json"), ("events", f"rank{r}.events.jsonl")):
            path = os.path.join(local, "ranks", name)
            if os.path.exists(path):
                store.set(f"{key}/{r}", open(path).read())
        store.set(f"exit/{r}", str(p.exitcode))
        deadline = time.time() + FINISH_WAIT_S
        while not has(store, "cmd/finish") and time.time() < deadline:
            time.sleep(PUBLISH_S)
    except Exception as e:  # noqa: BLE001 - the store is gone: rank 0's node ended or died
        print(f"ppx: rank{r}'s node agent lost the store: {type(e).__name__}: {e}", flush=True)
        if p.is_alive():
            p.kill()
            p.join()
        return 1
    return 0 if p.exitcode == 0 else 1
