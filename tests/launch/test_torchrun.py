"""Ranks under torchrun across "nodes": two torchrun launches on loopback (--nnodes=2,
c10d rendezvous at 127.0.0.1), one rank per worker, global rank 0 supervising. What the
watchdog and post-mortem read of remote ranks comes through torchrun's c10d store (the
mirror), so: the smoke serves at pp=4 with every rank's report in one run dir; a wedging
ordering names the cycle through the rank on the other launch, with its stack; killing the
other launch is a `dead_peer` with nothing left behind; a node that never joins ends with
torchrun's named rendezvous timeout and nothing spawned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ppx_helpers import ROOT, pids_alive

from ppx.engine.board import RANK_BLOCK, F, State
from ppx.supervisor import free_port

RUN_S = 420  # a launch on the small shared machine: hydra + 2-4 ranks booting


def launch(run_dir: Path, port: int, nproc: int, *overrides: str, join_timeout: int = 90):
    """Start one torchrun launch ("a node"); its output goes beside the run dir."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
        f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-conf=join_timeout={join_timeout}",
        "--max-restarts=0", "-m", "ppx.run", f"hydra.run.dir={run_dir}", "logger=none",
        *overrides,
    ]  # fmt: skip
    env = dict(os.environ, WANDB_MODE="offline")
    n = len(list(run_dir.parent.glob(f"{run_dir.name}.launch*.log")))
    log = open(run_dir.parent / f"{run_dir.name}.launch{n}.log", "w")
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


@pytest.fixture
def launches():
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:  # a failed test must not leave a launch behind
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


def two_nodes(launches, run_dir: Path, nproc: int, *overrides: str) -> None:
    port = free_port()
    launches += [launch(run_dir, port, nproc, *overrides) for _ in range(2)]


def wait_all(launches, limit_s: float = RUN_S) -> list[int]:
    deadline = time.time() + limit_s
    for p in launches:
        p.wait(max(1.0, deadline - time.time()))
    return [p.returncode for p in launches]


def all_rank_pids_gone(run_dir: Path) -> None:
    assert pids_alive(str(run_dir)) == []  # the supervisor's board: every rank, mirrored
    for node in (run_dir / "nodes").glob("rank*"):
        assert pids_alive(str(node)) == [], node
        info = json.loads((node / "node.json").read_text())
        assert not os.path.exists(f"/proc/{info['pid']}"), f"node agent {info} outlived the run"


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_smoke_serves_at_pp4_on_two_nodes(tmp_path: Path, launches) -> None:
    d = tmp_path / "run"
    two_nodes(launches, d, 2, "+exp=smoke", "pp=4", "workload.num_requests=8")
    codes = wait_all(launches)
    s = summary(d)
    assert s["verdict"] == "served" and s["served"] == s["submitted"] == 8, s
    assert s["oracle_mismatches"] == 0
    assert codes == [0, 0], codes
    for r in range(4):  # every rank's report and events landed in rank 0's run dir
        assert json.loads((d / "ranks" / f"rank{r}.json").read_text())["state"] == "done"
        assert (d / "ranks" / f"rank{r}.events.jsonl").exists()
    nodes = {json.loads((n / "node.json").read_text())["node"] for n in (d / "nodes").iterdir()}
    assert nodes == {0, 1}  # ranks really ran under both launches
    all_rank_pids_gone(d)


def test_wedge_names_the_cycle_through_the_other_node(tmp_path: Path, launches) -> None:
    d = tmp_path / "run"
    two_nodes(
        launches, d, 1, "pp=2", "engine/admission=decision",
        "engine/ordering=flush_before_decision", "workload.num_requests=4",
    )  # fmt: skip
    wait_all(launches)
    s = summary(d)
    assert s["verdict"] == "wedged", s
    assert s["cycle"].startswith("rank0 -[flush chain]-> rank1 -[recv decision"), s["cycle"]
    assert json.loads((d / "nodes" / "rank1" / "node.json").read_text())["node"] == 1
    blocked = json.loads((d / "postmortem" / "blocked_on.json").read_text())
    assert blocked[1]["op"] == "recv" and blocked[1]["kind"] == "decision", blocked
    assert blocked[1]["since_s"] >= 0  # the remote clock was mapped onto rank 0's
    stack = (d / "postmortem" / "stacks" / "rank1.txt").read_text()
    assert "ppx/engine" in stack, stack[:500]  # the remote rank's own stack, via the store
    all_rank_pids_gone(d)


def _rank1_running(d: Path) -> bool:
    path = d / "nodes" / "rank1" / "ranks" / "board.bin"
    if not path.exists():
        return False
    arr = np.fromfile(path, dtype=np.int64)
    if arr.size < 2 * RANK_BLOCK:
        return False
    return int(arr.reshape(-1, RANK_BLOCK)[1, F.STATE]) == State.RUNNING


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


@pytest.mark.parametrize("agent_signals", [False, True], ids=["quiet", "agent_signals"])
def test_killing_the_other_node_is_a_dead_peer(tmp_path: Path, launches, agent_signals) -> None:
    """`agent_signals`: the surviving torchrun agent may see the rendezvous lose a member
    before the supervisor's mirror does and SIGTERM its worker (the supervisor); that
    signal, sent here at once, must not turn a dead node into an `interrupted` run."""
    d = tmp_path / "run"
    two_nodes(launches, d, 1, "+exp=smoke", "pp=2", "workload.num_requests=400")
    deadline = time.time() + RUN_S
    while not _rank1_running(d):
        assert time.time() < deadline and all(p.poll() is None for p in launches)
        time.sleep(0.5)
    info = json.loads((d / "nodes" / "rank1" / "node.json").read_text())
    other = next(p for p in launches if p.pid == info["torchrun_pid"])
    os.kill(other.pid, signal.SIGKILL)  # the whole node goes: its torchrun agent first
    if agent_signals:
        survivor = next(p for p in launches if p is not other)
        for worker in _children(survivor.pid):
            os.kill(worker, signal.SIGTERM)
    wait_all(launches)
    s = summary(d)
    assert s["verdict"] == "dead_peer", s
    assert "rank1" in s["reason"] or "[1]" in s["reason"], s["reason"]
    all_rank_pids_gone(d)


def test_a_node_that_never_joins_is_a_named_rendezvous_timeout(tmp_path: Path, launches) -> None:
    d = tmp_path / "run"
    launches.append(launch(d, free_port(), 1, "pp=2", join_timeout=5))
    assert wait_all(launches, 120) != [0]
    out = (tmp_path / "run.launch0.log").read_text()
    assert "RendezvousTimeoutError" in out, out[-2000:]
    assert not d.exists()  # nothing was spawned: no worker ever ran
