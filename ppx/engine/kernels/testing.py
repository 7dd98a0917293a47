"""Comparison harness and input builders shared by the kernel tests and the benchmark.

``assert_kernel_close`` is the single definition of "a kernel matches the reference":

* integer outputs must be identical;
* fp32 outputs must agree within ``atol = rtol = 1e-5``;
* fp16/bf16 outputs must agree within ``2 * eps(dtype) * max|ref|`` (about two ulps of the
  largest value) and, for attention, have cosine similarity > 0.999 with the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

FP32_TOL = 1e-5
HALF_ULPS = 2.0
MIN_COSINE = 0.999


def assert_kernel_close(out: Tensor, ref: Tensor, *, what: str = "", cosine: bool = False) -> None:
    """Raise ``AssertionError`` unless ``out`` matches ``ref`` under the rules above."""
    label = what or "kernel output"
    assert out.shape == ref.shape, f"{label}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    assert out.dtype == ref.dtype, f"{label}: dtype {out.dtype} != {ref.dtype}"
    if not ref.is_floating_point():
        assert torch.equal(out, ref), f"{label}: integer outputs differ"
        return
    o, r = out.float(), ref.float()
    assert torch.isfinite(o).all() or not torch.isfinite(r).all(), f"{label}: non-finite output"
    if ref.dtype == torch.float32:
        torch.testing.assert_close(
            o, r, atol=FP32_TOL, rtol=FP32_TOL, msg=lambda m: f"{label}: {m}"
        )
    else:
        scale = r.abs().max().item() if r.numel() else 0.0
        tol = HALF_ULPS * torch.finfo(ref.dtype).eps * max(scale, 1e-6)
        err = (o - r).abs().max().item() if r.numel() else 0.0
        assert err <= tol, f"{label}: max abs error {err:.3g} > {tol:.3g} ({ref.dtype})"
    if cosine and r.numel():
        cos = torch.nn.functional.cosine_similarity(o.flatten(), r.flatten(), dim=0).item()
        assert cos > MIN_COSINE, f"{label}: cosine similarity {cos:.6f} <= {MIN_COSINE}"


def _randn(shape: tuple[int, ...], dtype: torch.dtype, device: str, gen: torch.Generator) -> Tensor:
    # Draw on the CPU so a seed gives the same data on every device.
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


def _indptr(lens: list[int], device: str) -> Tensor:
    ptr = [0]
    for n in lens:
        ptr.append(ptr[-1] + n)
    return torch.tensor(ptr, dtype=torch.int64, device=device)


@dataclass
class ExtendCase:
    """Positional arguments of ``extend_attention`` (in signature order)."""

    q: Tensor
    k_new: Tensor
    v_new: Tensor
    k_pool: Tensor
    v_pool: Tensor
    qo_indptr: Tensor
    prefix_indptr: Tensor
    prefix_indices: Tensor
    scale: float

    def args(self) -> tuple:
        return (
            self.q, self.k_new, self.v_new, self.k_pool, self.v_pool,
            self.qo_indptr, self.prefix_indptr, self.prefix_indices, self.scale,
        )  # fmt: skip


def make_extend_case(
    extend_lens: list[int],
    prefix_lens: list[int],
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: str = "cpu",
    seed: int = 0,
) -> ExtendCase:
    """A ragged extend batch whose prefixes live at random, scattered pool slots."""
    gen = torch.Generator().manual_seed(seed)
    total_new, total_pre = sum(extend_lens), sum(prefix_lens)
    pool = total_pre + 8  # a few unused slots so indices are not simply arange
    slots = torch.randperm(pool, generator=gen)[:total_pre].to(device=device, dtype=torch.int64)
    return ExtendCase(
        q=_randn((total_new, num_heads, head_dim), dtype, device, gen),
        k_new=_randn((total_new, num_kv_heads, head_dim), dtype, device, gen),
        v_new=_randn((total_new, num_kv_heads, head_dim), dtype, device, gen),
        k_pool=_randn((pool, num_kv_heads, head_dim), dtype, device, gen),
        v_pool=_randn((pool, num_kv_heads, head_dim), dtype, device, gen),
        qo_indptr=_indptr(extend_lens, device),
        prefix_indptr=_indptr(prefix_lens, device),
        prefix_indices=slots,
        scale=head_dim**-0.5,
    )


@dataclass
class DecodeCase:
    """Arguments of ``decode_attention`` except ``num_splits`` (in signature order)."""

    q: Tensor
    k_pool: Tensor
    v_pool: Tensor
    kv_indptr: Tensor
    kv_indices: Tensor
    scale: float

    def args(self) -> tuple:
        return (self.q, self.k_pool, self.v_pool, self.kv_indptr, self.kv_indices, self.scale)


def make_decode_case(
    kv_lens: list[int],
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: str = "cpu",
    seed: int = 0,
) -> DecodeCase:
    """A decode batch: one query per request, KV at random, scattered pool slots."""
    gen = torch.Generator().manual_seed(seed)
    total = sum(kv_lens)
    pool = total + 8
    slots = torch.randperm(pool, generator=gen)[:total].to(device=device, dtype=torch.int64)
    return DecodeCase(
        q=_randn((len(kv_lens), num_heads, head_dim), dtype, device, gen),
        k_pool=_randn((pool, num_kv_heads, head_dim), dtype, device, gen),
        v_pool=_randn((pool, num_kv_heads, head_dim), dtype, device, gen),
        kv_indptr=_indptr(kv_lens, device),
        kv_indices=slots,
        scale=head_dim**-0.5,
    )


def make_req_to_token(
    num_rows: int, max_len: int, pool_size: int, device: str = "cpu", seed: int = 0
) -> Tensor:
    """A ``req_to_token[R, L]`` int32 table filled with random pool slots."""
    gen = torch.Generator().manual_seed(seed)
    table = torch.randint(0, pool_size, (num_rows, max_len), generator=gen, dtype=torch.int32)
    return table.to(device)
