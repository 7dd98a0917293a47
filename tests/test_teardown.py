"""Every exit path tears every rank down: Ctrl-C to the whole process group (what a terminal
sends), SIGTERM to the supervisor alone (test_engine_e2e), and a supervisor killed outright,
whose ranks must die with it (PR_SET_PDEATHSIG) instead of living on as orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ppx_helpers import ROOT, pids_alive, wait_serving

# a closed loop that would run for ten minutes: whatever the signal meets is a running engine
LONG = ["+exp=micro_load", "engine.transport=gloo", "pp=2", "workload.duration_s=600"]


def _start(run_dir: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "ppx.run", f"hydra.run.dir={run_dir}", "logger=none", *LONG]
    return subprocess.Popen(
        args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job has
    )


def test_ctrl_c_to_the_process_group_interrupts_and_tears_down(tmp_path):
    run_dir = str(tmp_path / "int")
    p = _start(run_dir)
    try:
        wait_serving(run_dir, 2, p)
        os.killpg(p.pid, signal.SIGINT)  # every process of the job, the ranks included
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    s = json.load(open(os.path.join(run_dir, "summary.json")))
    assert (s["verdict"], s["reason"]) == ("interrupted", "signal received"), err[-2000:]
    assert p.returncode == 1  # a single run that was not served
    assert s["submitted"] == s["served"] + s["refused"] + s["lost"]
    assert pids_alive(run_dir) == []


def test_ranks_die_with_a_killed_supervisor(tmp_path):
    run_dir = str(tmp_path / "kill")
    p = _start(run_dir)
    try:
        wait_serving(run_dir, 2, p)
        ranks = pids_alive(run_dir)
        assert len(ranks) == 2
        p.kill()  # SIGKILL: no handler, no finally, no teardown of its own
        p.communicate(timeout=60)
        deadline = time.time() + 60  # the kernel's signal, then the ranks' exit
        while time.time() < deadline and pids_alive(run_dir):
            time.sleep(0.1)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        left = pids_alive(run_dir)
        for pid in left:  # a failing run must not leave its orphans on the machine
            os.kill(pid, signal.SIGKILL)
    assert left == [], "rank processes outlived their supervisor"
    assert not os.path.exists(os.path.join(run_dir, "summary.json"))  # it had no time to write
