"""End-to-end runs of `python -m ppx.run` over real gloo processes."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys

import pandas as pd
from ppx_helpers import ROOT, pids_alive, wait_serving

from ppx.run import WANDB_WARNING

# the micro model: these tests are about processes, pools and the wire, not the model's cost
SMALL = ["model=micro", "workload.num_requests=12", "workload.max_new=6", "workload.concurrency=6"]


def test_smoke_pp3_serves_checks_and_records(ppx_run):
    proc, s, run_dir = ppx_run("+exp=smoke", "pp=3", logger="wandb")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert s["verdict"] == "served"
    assert s["submitted"] >= 32 and s["submitted"] == s["served"] + s["refused"] and s["lost"] == 0
    assert s["cached_tokens"] > 0
    assert s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0
    assert s["max_inflight"] > 1, "the pipeline never had two slots in flight"
    for f in ("summary.json", "metrics.parquet", "events.parquet", "requests.parquet"):
        assert os.path.exists(os.path.join(run_dir, f)), f
    assert glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "*.wandb"))
    assert WANDB_WARNING.strip() not in proc.stderr  # logged, not merely attempted
    req = pd.read_parquet(os.path.join(run_dir, "requests.parquet"))
    assert (req["prompt_len"] > 64).all()  # the shared prefix is longer than the chunk size
    assert req["ttft_ms"].notna().all() and (req["output_len"] == 12).all()


def test_pp_1_2_3_are_token_identical(ppx_run):
    outs = {}
    for pp in (1, 2, 3):
        proc, s, run_dir = ppx_run("workload=random", f"pp={pp}", *SMALL, name=f"pp{pp}")
        assert s["verdict"] == "served", proc.stderr[-2000:]
        df = pd.read_parquet(os.path.join(run_dir, "requests.parquet")).set_index("rid")
        outs[pp] = {rid: list(ids) for rid, ids in df["output_ids"].items()}
    assert outs[1] == outs[2] == outs[3]


def test_small_pool_evicts_and_keeps_the_ledger(ppx_run):
    proc, s, _ = ppx_run(
        "+exp=smoke",
        "model=micro",
        "pp=2",
        "engine.kv.pool_tokens=260",
        "workload.num_prefixes=4",
        "workload.num_requests=16",
    )
    assert s["verdict"] == "served", proc.stderr[-2000:]
    assert sum(s["per_rank"]["evictions"]) > 0
    assert s["ledger_violations"] == 0 and s["oracle_mismatches"] == 0


def test_unfit_requests_are_refused_by_name_never_lost(ppx_run):
    proc, s, run_dir = ppx_run(
        "workload=random", "pp=2", "engine.kv.pool_tokens=90", "workload.prompt_max=120", *SMALL
    )
    assert s["verdict"] == "served", proc.stderr[-2000:]
    assert s["refused"] > 0 and s["served"] > 0
    assert s["submitted"] == s["served"] + s["refused"]
    req = pd.read_parquet(os.path.join(run_dir, "requests.parquet"))
    assert req[req.outcome == "refused"]["reason"].str.contains("smallest KV pool").all()


def test_wrong_order_wedges_with_named_cycle_and_postmortem(ppx_run):
    steps = "engine.ordering.steps=[chain,schedule,{step:launch,flush:true},output,flush]"
    proc, s, run_dir = ppx_run(
        "pp=3", steps, "engine.ordering.name=launch_flush", "watch.stall_s=2", *SMALL
    )
    assert proc.returncode != 0
    assert s["verdict"] == "wedged"
    assert s["cycle"] and "flush proxy" in s["cycle"]
    assert s["submitted"] == s["served"] + s["refused"] + s["lost"]
    for f in (
        "cycle.txt",
        "waitfor.png",
        "blocked_on.json",
        "ledger.json",
        "ops.parquet",
        "stacks/rank0.txt",
    ):
        assert os.path.exists(os.path.join(run_dir, "postmortem", f)), f
    assert "flush" in open(os.path.join(run_dir, "postmortem", "stacks", "rank0.txt")).read()


def test_sigterm_interrupts_tears_down_and_writes_summary(tmp_path):
    run_dir = str(tmp_path / "sig")
    args = [
        sys.executable,
        "-m",
        "ppx.run",
        f"hydra.run.dir={run_dir}",
        "logger=none",
        "pp=3",
        "workload.num_requests=400",
        "workload.max_new=32",
    ]
    p = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_serving(run_dir, 3, p)  # a running engine, not one still starting
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    import json

    s = json.load(open(os.path.join(run_dir, "summary.json")))
    assert s["verdict"] == "interrupted"
    assert s["submitted"] == s["served"] + s["refused"] + s["lost"]
    assert pids_alive(run_dir) == []
