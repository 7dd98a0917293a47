"""`device=cuda:N` makes GPU N the rank's current device on the gloo path (triton launches
and CUDA streams follow the current device, not the tensors' one). CPU-runnable: the real
gloo transport is opened (world 1) with torch.cuda.set_device recorded instead of called."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ppx.engine.transport import bind_device
from ppx.engine.transport.registry import TRANSPORTS
from ppx.supervisor import free_port


@pytest.fixture
def set_device_calls(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(torch.cuda, "set_device", calls.append)
    return calls


@pytest.mark.parametrize(("device", "want"), [("cuda:1", [1]), ("cuda:3", [3]), ("cpu", [])])
def test_the_gloo_path_binds_the_configured_gpu(set_device_calls, device, want) -> None:
    t = TRANSPORTS["gloo"].open(SimpleNamespace(device=device), 0, 1, free_port())
    try:
        assert set_device_calls == want
    finally:
        t.close()


def test_a_bare_cuda_keeps_the_current_device(set_device_calls) -> None:
    assert bind_device("cuda") is None and set_device_calls == []
