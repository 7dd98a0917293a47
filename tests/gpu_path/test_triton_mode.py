"""The triton backend is chosen by the tensors' device, not by the machine: on a machine with
CUDA, `device=cpu engine/kernels=triton` and the CPU kernel tests still run the interpreter.
CPU-runnable: CUDA's presence is faked in a fresh interpreter (triton reads the choice when
its kernels are defined, so each case needs its own process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from ppx_helpers import ROOT

from ppx.engine.kernels.registry import triton_mode

FAKE_CUDA = (
    "import torch; torch.cuda.is_available = lambda: True; torch.cuda.device_count = lambda: 1\n"
)


def _py(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("device", "env", "mode"),
    [
        ("cpu", None, "interpret"),
        ("cuda", None, "compiled"),
        ("cuda:1", None, "compiled"),
        ("cuda:0", "1", "interpret"),  # an explicit TRITON_INTERPRET=1 on a GPU is kept (debugging)
        ("cpu", "0", "interpret"),  # a CPU tensor cannot run a compiled kernel, whatever the env
    ],
)
def test_mode_follows_the_device(monkeypatch, device, env, mode) -> None:
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    # the env below is the user's: an earlier test in this process may have loaded the kernels
    # (and recorded the value ppx itself wrote)
    monkeypatch.setattr("ppx.engine.kernels.registry._SET_BY_US", [None])
    if env is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", env)
    assert triton_mode(device) == mode


def test_cpu_tensors_on_a_cuda_machine_run_interpreted_and_right() -> None:
    # The red arm is the old rule (`interpret iff not torch.cuda.is_available()`): with CUDA
    # present it left the kernels compiled, and the first CPU tensor failed inside triton.
    code = FAKE_CUDA + (
        "import os, torch\n"
        "from ppx.engine.kernels.registry import get_kernels, reference_kernels\n"
        "tri = get_kernels('triton', 'cpu')\n"
        "assert os.environ['TRITON_INTERPRET'] == '1', os.environ.get('TRITON_INTERPRET')\n"
        "x, w = torch.randn(5, 32), torch.randn(32)\n"
        "got, want = tri.rms_norm(x, w, 1e-5), reference_kernels().rms_norm(x, w, 1e-5)\n"
        "assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()\n"
        "print('ok')\n"
    )
    r = _py(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_asking_for_the_other_mode_later_is_a_named_error() -> None:
    code = FAKE_CUDA + (
        "from ppx.engine.kernels.registry import get_kernels\n"
        "get_kernels('triton', 'cpu')\n"
        "try:\n"
        "    get_kernels('triton', 'cuda:0')\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    r = _py(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "loaded interpret in this process" in r.stdout and "fresh process" in r.stdout, r.stdout
