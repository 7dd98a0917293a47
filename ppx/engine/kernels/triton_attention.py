"""Triton extend (prefill) attention over a paged KV pool, with a cached prefix per request.

Decode attention lives in ``triton_decode``.

It uses the online-softmax recurrence (running max ``m``, running denominator ``l``,
unnormalised accumulator ``acc``) in fp32. KV rows are gathered through int64 slot indices,
so pool offsets are computed in 64-bit and cannot overflow on large pools. K/V tiles are
converted to q's dtype on load (a no-op when they match), so a pool kept in another dtype
still feeds tl.dot operands of one type.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from ppx.engine.kernels.triton_common import (
    attention_tile,
    block_size,
    cast_to,
    dot_precision,
    mma,
)

# Masked scores use a large finite value rather than -inf: a row that has seen only masked
# keys then gets exp(0) junk instead of NaN, and that junk is wiped (alpha = 0) by the first
# real key. Every row this kernel stores does see at least one real key.
NEG_BIG: tl.constexpr = tl.constexpr(-1.0e30)


@triton.jit
def _extend_kernel(
    q_ptr, k_new_ptr, v_new_ptr, k_pool_ptr, v_pool_ptr, out_ptr,
    qo_indptr_ptr, prefix_indptr_ptr, prefix_indices_ptr, scale,
    s_qt, s_qh, s_knt, s_knh, s_vnt, s_vnh, s_kpt, s_kph, s_vpt, s_vph, s_ot, s_oh,
    HEAD_DIM, GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    h = tl.program_id(1)
    m_block = tl.program_id(2)
    q_start = tl.load(qo_indptr_ptr + b)
    n_new = tl.load(qo_indptr_ptr + b + 1) - q_start
    # The grid is sized for the longest request; shorter ones (and fully cached ones with
    # n_new == 0) leave their surplus programs idle.
    if m_block * BLOCK_M >= n_new:
        return
    p_start = tl.load(prefix_indptr_ptr + b)
    n_pre = tl.load(prefix_indptr_ptr + b + 1) - p_start
    kvh = h // GROUP

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_mask = offs_m < n_new
    d_mask = offs_d < HEAD_DIM
    rows = (q_start + offs_m).to(tl.int64)
    q = tl.load(
        q_ptr + rows[:, None] * s_qt + h * s_qh + offs_d[None, :],
        mask=m_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    m_i = tl.full([BLOCK_M], NEG_BIG, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # Stage 1: the cached prefix, visible to every new token (no causal mask).
    for start in range(0, n_pre, BLOCK_N):
        n_mask = start + offs_n < n_pre
        slots = tl.load(prefix_indices_ptr + p_start + start + offs_n, mask=n_mask, other=0)
        slots = slots.to(tl.int64)
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(k_pool_ptr + slots[:, None] * s_kpt + kvh * s_kph + offs_d[None, :],
                    mask=kv_mask, other=0.0).to(q.dtype)  # fmt: skip
        v = tl.load(v_pool_ptr + slots[:, None] * s_vpt + kvh * s_vph + offs_d[None, :],
                    mask=kv_mask, other=0.0).to(q.dtype)  # fmt: skip
        s = mma(q, tl.trans(k), PRECISION) * scale
        s = tl.where(n_mask[None, :], s, NEG_BIG)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + mma(cast_to(p, v.dtype), v, PRECISION)
        m_i = m_new

    # Stage 2: the new tokens themselves, causal; keys past this tile's last row are unseen.
    hi = tl.minimum(n_new, (m_block + 1) * BLOCK_M)
    for start in range(0, hi, BLOCK_N):
        cols = start + offs_n
        n_mask = cols < n_new
        kv_rows = (q_start + cols).to(tl.int64)
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(k_new_ptr + kv_rows[:, None] * s_knt + kvh * s_knh + offs_d[None, :],
                    mask=kv_mask, other=0.0).to(q.dtype)  # fmt: skip
        v = tl.load(v_new_ptr + kv_rows[:, None] * s_vnt + kvh * s_vnh + offs_d[None, :],
                    mask=kv_mask, other=0.0).to(q.dtype)  # fmt: skip
        s = mma(q, tl.trans(k), PRECISION) * scale
        causal = (cols[None, :] <= offs_m[:, None]) & n_mask[None, :]
        s = tl.where(causal, s, NEG_BIG)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + mma(cast_to(p, v.dtype), v, PRECISION)
        m_i = m_new

    out = acc / l_i[:, None]
    tl.store(
        out_ptr + rows[:, None] * s_ot + h * s_oh + offs_d[None, :],
        cast_to(out, out_ptr.dtype.element_ty),
        mask=m_mask[:, None] & d_mask[None, :],
    )


def extend_attention(
    q: Tensor,
    k_new: Tensor,
    v_new: Tensor,
    k_pool: Tensor,
    v_pool: Tensor,
    qo_indptr: Tensor,
    prefix_indptr: Tensor,
    prefix_indices: Tensor,
    scale: float,
) -> Tensor:
    t, nh, d = q.shape
    nkv = k_new.shape[1]
    out = torch.zeros_like(q)
    batch = qo_indptr.numel() - 1
    if t == 0 or batch <= 0:
        return out
    # One host sync to size the grid by the longest extend in the batch.
    max_new = int((qo_indptr[1:] - qo_indptr[:-1]).max().item())
    if max_new == 0:
        return out
    q, k_new, v_new, k_pool, v_pool = (
        x if x.stride(-1) == 1 else x.contiguous() for x in (q, k_new, v_new, k_pool, v_pool)
    )
    tile = attention_tile(q.dtype)
    grid = (batch, nh, triton.cdiv(max_new, tile))
    _extend_kernel[grid](
        q, k_new, v_new, k_pool, v_pool, out,
        qo_indptr.contiguous(), prefix_indptr.contiguous(), prefix_indices.contiguous(),
        float(scale),
        q.stride(0), q.stride(1), k_new.stride(0), k_new.stride(1),
        v_new.stride(0), v_new.stride(1), k_pool.stride(0), k_pool.stride(1),
        v_pool.stride(0), v_pool.stride(1), out.stride(0), out.stride(1),
        d, GROUP=nh // nkv, BLOCK_M=tile, BLOCK_N=tile, BLOCK_D=block_size(d, 16),
        PRECISION=dot_precision(q.dtype),
    )  # fmt: skip
    return out
