"""Fixtures for the kernel tests.

Tests run on the CPU (triton under its interpreter) unless ``PPX_TEST_DEVICE=cuda``.
"""

from __future__ import annotations

import os

import pytest
import torch

from ppx.engine.kernels import Kernels, get_kernels
from ppx.engine.kernels.registry import reference_kernels


@pytest.fixture(scope="session")
def device() -> str:
    name = os.environ.get("PPX_TEST_DEVICE", "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.fail(f"PPX_TEST_DEVICE={name} but CUDA is not available", pytrace=False)
    return name


@pytest.fixture(scope="session")
def ref() -> Kernels:
    return reference_kernels()


@pytest.fixture(scope="session")
def batched() -> Kernels:
    return get_kernels("torch")


@pytest.fixture(scope="session")
def tri(device: str) -> Kernels:
    return get_kernels("triton", device)
