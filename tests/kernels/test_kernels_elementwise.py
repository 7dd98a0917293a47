"""RMSNorm, RoPE and SiLU-and-mul: triton vs the torch reference."""

from __future__ import annotations

import pytest
import torch

from ppx.engine.kernels.testing import assert_kernel_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _randn(*shape: int, dtype: torch.dtype, device: str, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(device=device, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 8), (7, 48), (3, 1000)])
def test_rms_norm(ref, tri, device, dtype, shape):
    x = _randn(*shape, dtype=dtype, device=device) * 3
    w = _randn(shape[1], dtype=dtype, device=device, seed=1)
    assert_kernel_close(tri.rms_norm(x, w, 1e-6), ref.rms_norm(x, w, 1e-6), what="rms_norm")


def test_rms_norm_strided_rows(ref, tri, device):
    # A view with a row stride larger than H, as when normalising a slice of a wider buffer.
    base = _randn(5, 64, dtype=torch.float32, device=device)
    x, w = base[:, :40], _randn(40, dtype=torch.float32, device=device, seed=1)
    assert_kernel_close(tri.rms_norm(x, w, 1e-5), ref.rms_norm(x, w, 1e-5), what="rms_norm")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (8, 2)], ids=lambda h: f"nh{h[0]}-nkv{h[1]}")
def test_rope(ref, tri, device, dtype, heads):
    nh, nkv = heads
    t, d = 6, 32
    q = _randn(t, nh, d, dtype=dtype, device=device)
    k = _randn(t, nkv, d, dtype=dtype, device=device, seed=1)
    # Large positions matter: the angle is position * inv_freq, up to tens of thousands rad.
    pos = torch.tensor([0, 1, 7, 513, 4095, 30000], dtype=torch.int64, device=device)
    q_before, k_before = q.clone(), k.clone()
    (qo, ko), (qr, kr) = tri.rope(q, k, pos, 10000.0), ref.rope(q, k, pos, 10000.0)
    assert_kernel_close(qo, qr, what="rope q")
    assert_kernel_close(ko, kr, what="rope k")
    # Not in place: the caller's tensors are untouched.
    assert torch.equal(q, q_before) and torch.equal(k, k_before)


def test_rope_views_of_fused_qkv(ref, tri, device):
    # q and k as strided views of one fused projection output [T, (nh + 2 nkv) * d].
    t, nh, nkv, d = 5, 4, 2, 16
    qkv = _randn(t, (nh + 2 * nkv) * d, dtype=torch.float32, device=device)
    q = qkv[:, : nh * d].view(t, nh, d)
    k = qkv[:, nh * d : (nh + nkv) * d].view(t, nkv, d)
    pos = torch.arange(100, 100 + t, device=device)
    (qo, ko), (qr, kr) = tri.rope(q, k, pos, 500000.0), ref.rope(q, k, pos, 500000.0)
    assert_kernel_close(qo, qr, what="rope q")
    assert_kernel_close(ko, kr, what="rope k")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 16), (5, 96), (3, 2 * 1100)])
def test_silu_and_mul(ref, tri, device, dtype, shape):
    x = _randn(*shape, dtype=dtype, device=device) * 4
    assert_kernel_close(tri.silu_and_mul(x), ref.silu_and_mul(x), what="silu_and_mul")


def test_empty_token_batch(ref, tri, device):
    x = torch.zeros(0, 16, device=device)
    assert tri.rms_norm(x, torch.ones(16, device=device), 1e-6).shape == (0, 16)
    assert tri.silu_and_mul(torch.zeros(0, 32, device=device)).shape == (0, 16)


def test_many_rows_cross_row_tiles(ref, tri, device):
    # 200 tokens: under the interpreter one program takes up to 128 rows (rows_per_program),
    # so this is two programs, the second with a masked tail; on a GPU, 200 programs.
    # (imported here: the `tri` fixture must have chosen interpreter vs compiled first)
    from ppx.engine.kernels.triton_common import rows_per_program

    t = 200
    assert rows_per_program(t) == (128 if device == "cpu" else 1)
    x = _randn(t, 48, dtype=torch.float32, device=device)
    w = _randn(48, dtype=torch.float32, device=device, seed=1)
    assert_kernel_close(tri.rms_norm(x, w, 1e-6), ref.rms_norm(x, w, 1e-6), what="rms_norm")
    g = _randn(t, 2 * 40, dtype=torch.float32, device=device, seed=2)
    assert_kernel_close(tri.silu_and_mul(g), ref.silu_and_mul(g), what="silu_and_mul")
    q = _randn(t, 4, 16, dtype=torch.float32, device=device, seed=3)
    k = _randn(t, 2, 16, dtype=torch.float32, device=device, seed=4)
    pos = torch.arange(t, device=device) * 37
    (qo, ko), (qr, kr) = tri.rope(q, k, pos, 10000.0), ref.rope(q, k, pos, 10000.0)
    assert_kernel_close(qo, qr, what="rope q")
    assert_kernel_close(ko, kr, what="rope k")
