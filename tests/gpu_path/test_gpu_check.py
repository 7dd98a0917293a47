"""benchmarks/gpu_check.sh's verdict logic, on the CPU, with a fake `python` that answers
like a GPU machine (N GPUs; chosen steps failing). Red arms are the old script's faults: it
said OK on a one-GPU box where NCCL never ran, and stopped before any summary on a failed
step under `set -e`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ppx_helpers import ROOT

FAKE = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
if [[ $1 == -c ]]; then
    case $2 in
        *is_available*) exit 0 ;;
        *device_count*) echo "$FAKE_NGPU"; exit 0 ;;
        *) exec "$REAL_PY" "$@" ;;
    esac
fi
if [[ $1 == -m && $2 == pytest ]]; then exit "${FAKE_PYTEST_RC:-0}"; fi
if [[ $1 == -m && $2 == ppx.run ]]; then
    verdict=served
    for a in "$@"; do
        [[ $a == hydra.run.dir=* ]] && dir=${a#hydra.run.dir=}
        [[ $a == engine.transport=nccl ]] && verdict=${FAKE_NCCL_VERDICT:-served}
    done
    mkdir -p "$dir" && echo "{\"verdict\": \"$verdict\"}" > "$dir/summary.json"
    exit 0
fi
exit 0  # benchmarks/bench_kernels.py
"""


def gpu_check(tmp_path: Path, ngpu: int, **env: str) -> tuple[subprocess.CompletedProcess, str]:
    fake = tmp_path / "python"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    log = tmp_path / "calls.log"
    e = dict(
        os.environ,
        PYTHON=str(fake),
        REAL_PY=sys.executable,
        FAKE_NGPU=str(ngpu),
        FAKE_LOG=str(log),
        GPU_CHECK_OUT=str(tmp_path / "out"),
        **env,
    )
    r = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh"], cwd=ROOT, env=e, capture_output=True, text=True
    )
    return r, log.read_text() if log.exists() else ""


def test_one_gpu_is_partial_not_ok(tmp_path: Path) -> None:
    r, calls = gpu_check(tmp_path, 1)
    assert r.returncode == 3, r.stdout[-2000:]
    assert "gpu_check: PARTIAL" in r.stdout and "gpu_check: OK" not in r.stdout
    assert "SKIP  6 one GPU per rank over NCCL" in r.stdout
    assert "SKIP  8 NCCL vs sim.semantics=nccl" in r.stdout  # never a pass without two GPUs
    assert "engine.transport=nccl" not in calls


def test_two_gpus_run_nccl_bounded_and_say_ok(tmp_path: Path) -> None:
    r, calls = gpu_check(tmp_path, 2, PPX_HF_CHECKPOINT=str(tmp_path / "ckpt"))
    assert r.returncode == 0, r.stdout[-2000:]
    assert r.stdout.rstrip().endswith("gpu_check: OK")
    runs = [c for c in calls.splitlines() if c.startswith("-m ppx.run")]
    assert len(runs) == 8 and any("engine.transport=nccl" in c for c in runs)
    # step 8: each ordering once on real NCCL and once on the simulator's NCCL model
    assert len([c for c in runs if "sim.semantics=nccl" in c]) == 2
    assert "PASS  8 NCCL vs sim.semantics=nccl: flush_before_decision (pp=2)" in r.stdout
    assert any(f"model=hf model.path={tmp_path / 'ckpt'}" in c for c in runs)
    assert any("device=cuda:1" in c for c in runs)
    assert all("watch.max_run_s=" in c for c in runs)  # every engine run is bounded


def test_a_verdict_nccl_and_the_simulator_disagree_on_fails_the_check(tmp_path: Path) -> None:
    r, _ = gpu_check(tmp_path, 2, PPX_HF_CHECKPOINT=str(tmp_path), FAKE_NCCL_VERDICT="wedged")
    assert r.returncode == 1, r.stdout[-2000:]
    assert "verdict on NCCL wedged, on sim.semantics=nccl served" in r.stdout
    assert (
        "FAIL  8 NCCL vs sim.semantics=nccl: decision_first (pp=2)  (verdicts differ)" in r.stdout
    )
    assert r.stdout.rstrip().endswith("gpu_check: FAILED")


def test_hf_checkpoint_step_skipped_without_the_variable(tmp_path: Path) -> None:
    """Step 7 boots PPX_HF_CHECKPOINT; unset, it is a SKIP and the check says PARTIAL."""
    r, calls = gpu_check(tmp_path, 2, PPX_HF_CHECKPOINT="")  # empty counts as unset
    assert r.returncode == 3 and "SKIP  7 HF checkpoint on CUDA (model=hf)" in r.stdout
    assert "model=hf" not in calls and r.stdout.rstrip().endswith("gpu_check: PARTIAL")


def test_a_failed_step_still_runs_the_rest_and_prints_the_summary(tmp_path: Path) -> None:
    r, calls = gpu_check(tmp_path, 2, FAKE_PYTEST_RC="1")
    assert r.returncode == 1
    assert "FAIL  1 kernel tests on CUDA" in r.stdout
    assert "PASS  6 one GPU per rank over NCCL" in r.stdout  # later steps ran
    assert r.stdout.rstrip().endswith("gpu_check: FAILED")


def test_no_cuda_fails_up_front_with_the_summary(tmp_path: Path) -> None:
    fake = tmp_path / "nocuda"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    r = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh"],
        cwd=ROOT,
        env=dict(os.environ, PYTHON=str(fake)),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "FAIL  preflight: CUDA" in r.stdout
    assert r.stdout.rstrip().endswith("gpu_check: FAILED")
