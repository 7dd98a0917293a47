"""scripts/setup.sh's torch decision (scripts/torch_choice.py), with fake machine facts:
a GPU machine with a CPU-only torch fails and names the CUDA build for the driver, instead of
reporting success; the shell script takes the same decision with a fake `nvidia-smi`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ppx_helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))

from torch_choice import TORCH, choose  # noqa: E402

CU = "https://download.pytorch.org/whl/cu"


@pytest.mark.parametrize(
    ("gpu", "driver", "tv", "tc", "action", "arg"),
    [
        (False, None, None, None, "cpu", ""),
        (False, None, "2.13.0+cpu", None, "keep", ""),
        (True, "12.8", None, None, "cuda", CU + "128"),
        (True, "13.1", None, None, "cuda", CU + "130"),
        (True, "12.7", None, None, "cuda", CU + "126"),
        (True, "12.4", None, None, "fail", ""),  # older than every CUDA build of torch
        (True, "12.8", "2.13.0+cpu", None, "fail", ""),  # the defect: kept and "success"
        (True, "12.8", "2.13.0+cu130", "13.0", "fail", ""),  # built for a newer CUDA
        (True, "12.8", "2.13.0+cu128", "12.8", "keep", ""),
        (True, None, "2.13.0+cu128", "12.8", "keep", ""),  # driver version unreadable
    ],
)
def test_choice(gpu, driver, tv, tc, action, arg) -> None:
    c = choose(gpu, driver, tv, tc)
    assert (c.action, c.arg) == (action, arg), c
    assert c.message


def test_cpu_torch_on_a_gpu_machine_names_the_fix() -> None:
    c = choose(True, "12.8", "2.13.0+cpu", None)
    assert "CPU-only" in c.message
    assert f"pip install --force-reinstall torch=={TORCH} --index-url {CU}128" in c.message


def _setup_check(tmp_path: Path, smi: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\n" + smi)
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHON=sys.executable)
    return subprocess.run(
        ["bash", "scripts/setup.sh", "--check-torch"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


needs_cpu_torch = pytest.mark.skipif(
    __import__("torch").version.cuda is not None, reason="this machine's torch is a CUDA build"
)


@needs_cpu_torch
def test_setup_fails_on_a_gpu_machine_with_this_cpu_torch(tmp_path: Path) -> None:
    r = _setup_check(
        tmp_path,
        'echo "| NVIDIA-SMI 580.95   Driver Version: 580.95   CUDA Version: 12.8 |"\n',
    )
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "CPU-only build" in r.stderr and f"{CU}128" in r.stderr, r.stderr


@needs_cpu_torch
def test_setup_keeps_this_cpu_torch_without_a_gpu(tmp_path: Path) -> None:
    r = _setup_check(tmp_path, 'echo "NVIDIA-SMI has failed" >&2; exit 9\n')
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "keep"
