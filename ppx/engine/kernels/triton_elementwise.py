"""Triton kernels for the per-token ops: RMSNorm, rotary embedding, SiLU-and-multiply.

Every kernel reads its inputs, computes in fp32 and writes the output dtype once, matching
the reference's rounding. Inputs may be strided in the token/head dims (e.g. q and k as
views of a fused qkv projection); only the last dim has to be contiguous.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from ppx.engine.kernels.torch_ref import rope_inv_freq
from ppx.engine.kernels.triton_common import block_size, cast_to, rows_per_program


def _last_dim_contiguous(x: Tensor) -> Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


@triton.jit
def _rms_norm_kernel(
    x_ptr, w_ptr, out_ptr, stride_x, stride_out, T, H, eps,
    BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr,
):  # fmt: skip
    # BLOCK_T rows per program (see rows_per_program); the whole hidden dim fits in one tile,
    # so the reduction and the scaling share a single read of x.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)[:, None]
    cols = tl.arange(0, BLOCK_H)[None, :]
    mask = (rows < T) & (cols < H)
    x = tl.load(x_ptr + rows * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / H + eps)
    w = tl.load(w_ptr + cols, mask=cols < H, other=0.0).to(tl.float32)
    y = x * inv_rms[:, None] * w
    tl.store(out_ptr + rows * stride_out + cols, cast_to(y, out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    x = _last_dim_contiguous(x)
    t, h = x.shape
    out = torch.empty((t, h), dtype=x.dtype, device=x.device)
    if t == 0:
        return out
    block, rows = block_size(h), rows_per_program(t)
    _rms_norm_kernel[(triton.cdiv(t, rows),)](
        x, weight.contiguous(), out, x.stride(0), out.stride(0), t, h, float(eps),
        BLOCK_T=rows, BLOCK_H=block, num_warps=min(16, max(1, block // 256)),
    )  # fmt: skip
    return out


@triton.jit
def _rope_kernel(
    x_ptr, out_ptr, cos_ptr, sin_ptr,
    stride_xt, stride_xh, stride_ot, stride_oh,
    T, num_heads, HALF,
    BLOCK_T: tl.constexpr, BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr,
):  # fmt: skip
    # BLOCK_T tokens per program (see rows_per_program); each token rotates all of its heads
    # with the same cos/sin row.
    tok = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)[:, None, None]
    heads = tl.arange(0, BLOCK_HEADS)[None, :, None]
    cols = tl.arange(0, BLOCK_HALF)[None, None, :]
    row_mask = (tok < T) & (cols < HALF)
    mask = row_mask & (heads < num_heads)
    cos = tl.load(cos_ptr + tok * HALF + cols, mask=row_mask, other=0.0)
    sin = tl.load(sin_ptr + tok * HALF + cols, mask=row_mask, other=0.0)
    src = x_ptr + tok * stride_xt + heads * stride_xh + cols
    x1 = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=mask, other=0.0).to(tl.float32)
    dst = out_ptr + tok * stride_ot + heads * stride_oh + cols
    dtype = out_ptr.dtype.element_ty
    tl.store(dst, cast_to(x1 * cos - x2 * sin, dtype), mask=mask)
    tl.store(dst + HALF, cast_to(x2 * cos + x1 * sin, dtype), mask=mask)


def _rope_one(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    x = _last_dim_contiguous(x)
    t, nh, d = x.shape
    out = torch.empty((t, nh, d), dtype=x.dtype, device=x.device)
    if t == 0 or nh == 0:
        return out
    half, rows = d // 2, rows_per_program(t)
    _rope_kernel[(triton.cdiv(t, rows),)](
        x, out, cos, sin, x.stride(0), x.stride(1), out.stride(0), out.stride(1), t, nh, half,
        BLOCK_T=rows, BLOCK_HEADS=block_size(nh), BLOCK_HALF=block_size(half),
    )  # fmt: skip
    return out


def rope(q: Tensor, k: Tensor, positions: Tensor, theta: float) -> tuple[Tensor, Tensor]:
    # cos/sin come from torch, not tl.cos/tl.sin: angles reach position * 1 rad (thousands),
    # where GPU approximate trig loses accuracy, and sharing the reference's fp32 formula keeps
    # the two backends bit-identical up to the rotation itself. This is a [T, d/2] table,
    # small next to q and k.
    inv_freq = rope_inv_freq(q.shape[-1], theta, q.device)
    freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    cos, sin = freqs.cos().contiguous(), freqs.sin().contiguous()
    return _rope_one(q, cos, sin), _rope_one(k, cos, sin)


@triton.jit
def _silu_and_mul_kernel(
    x_ptr, out_ptr, stride_x, stride_out, T, INTER, BLOCK_T: tl.constexpr, BLOCK: tl.constexpr
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)[:, None]
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = (rows < T) & (cols < INTER)
    gate = tl.load(x_ptr + rows * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + rows * stride_x + INTER + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + rows * stride_out + cols, cast_to(y, out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x: Tensor) -> Tensor:
    x = _last_dim_contiguous(x)
    t, two_i = x.shape
    inter = two_i // 2
    out = torch.empty((t, inter), dtype=x.dtype, device=x.device)
    if t == 0 or inter == 0:
        return out
    block, rows = min(block_size(inter), 1024), rows_per_program(t)
    _silu_and_mul_kernel[(triton.cdiv(t, rows), triton.cdiv(inter, block))](
        x, out, x.stride(0), out.stride(0), t, inter, BLOCK_T=rows, BLOCK=block
    )
    return out
