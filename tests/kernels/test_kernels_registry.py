"""The registry's contract: backend names, the exact field set, lazy triton import."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ppx.engine.kernels import KERNEL_BACKENDS, Kernels, get_kernels

FIELDS = [
    "rms_norm",
    "rope",
    "silu_and_mul",
    "build_kv_indices",
    "extend_attention",
    "decode_attention",
]
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_kernels_has_exactly_the_contract_fields():
    assert [f.name for f in dataclasses.fields(Kernels)] == FIELDS


@pytest.mark.parametrize("name", KERNEL_BACKENDS)
def test_get_kernels_returns_frozen_bundle(name, device):
    kernels = get_kernels(name, device)
    assert all(callable(getattr(kernels, f)) for f in FIELDS)
    assert get_kernels(name, device) is kernels  # built once, then cached
    with pytest.raises(dataclasses.FrozenInstanceError):
        kernels.rms_norm = None  # type: ignore[misc]


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match=r"engine\.kernels\.name='cutlass': torch \| triton"):
        get_kernels("cutlass")


def test_torch_backend_never_imports_triton():
    # A fresh interpreter, because this test session has imported triton already.
    code = (
        "import sys; from ppx.engine.kernels import get_kernels; get_kernels('torch'); "
        "assert 'triton' not in sys.modules, 'triton was imported'"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_triton_backend_interprets_exactly_for_cpu_tensors(device):
    # by the tensors' device, not by the machine (tests/gpu_path/test_triton_mode.py: a CPU
    # tensor on a machine that has CUDA)
    get_kernels("triton", device)
    want = "1" if device == "cpu" else "0"
    assert os.environ.get("TRITON_INTERPRET") == want
