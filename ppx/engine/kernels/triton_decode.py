"""Triton split-KV decode attention (one query token per request).

A decode batch has few queries but long KV, so one program per (request, kv head) would
leave most of the GPU idle. Stage 1 therefore splits each request's KV into ``num_splits``
chunks and writes, per chunk, the normalised partial output and its log-sum-exp; stage 2
merges the chunks with LSE weights. All GQA query heads of one kv head share a program, so
each KV tile is read once and used by the whole group through one ``tl.dot``.
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
    decode_splits,
    dot_precision,
    mma,
)

NEG_BIG: tl.constexpr = tl.constexpr(-1.0e30)


@triton.jit
def _decode_partial_kernel(
    q_ptr, k_pool_ptr, v_pool_ptr, kv_indptr_ptr, kv_indices_ptr, mid_o_ptr, mid_lse_ptr,
    scale, s_qb, s_qh, s_kpt, s_kph, s_vpt, s_vph,
    NUM_HEADS, HEAD_DIM, GROUP: tl.constexpr, NUM_SPLITS: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    kv_start = tl.load(kv_indptr_ptr + b)
    kv_len = tl.load(kv_indptr_ptr + b + 1) - kv_start
    split_len = tl.cdiv(kv_len, NUM_SPLITS)
    lo = split * split_len
    hi = tl.minimum(lo + split_len, kv_len)

    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    g_mask = offs_g < GROUP  # BLOCK_G is padded up to tl.dot's minimum of 16 rows
    d_mask = offs_d < HEAD_DIM
    heads = kvh * GROUP + offs_g
    q = tl.load(
        q_ptr + b.to(tl.int64) * s_qb + heads[:, None] * s_qh + offs_d[None, :],
        mask=g_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    m_i = tl.full([BLOCK_G], NEG_BIG, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
    for start in range(lo, hi, BLOCK_N):
        n_mask = start + offs_n < hi
        slots = tl.load(kv_indices_ptr + kv_start + start + offs_n, mask=n_mask, other=0)
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

    # An empty split (kv_len < NUM_SPLITS, or lo >= hi) reports lse = -inf so the merge
    # gives it zero weight.
    has_kv = l_i > 0.0
    safe_l = tl.where(has_kv, l_i, 1.0)
    lse = tl.where(has_kv, m_i + tl.log(safe_l), float("-inf"))
    row = (b * NUM_HEADS + heads).to(tl.int64) * NUM_SPLITS + split
    tl.store(mid_lse_ptr + row, lse, mask=g_mask)
    tl.store(
        mid_o_ptr + row[:, None] * HEAD_DIM + offs_d[None, :],
        acc / safe_l[:, None],
        mask=g_mask[:, None] & d_mask[None, :],
    )


@triton.jit
def _decode_merge_kernel(
    mid_o_ptr, mid_lse_ptr, out_ptr, s_ob, s_oh, NUM_HEADS, HEAD_DIM,
    NUM_SPLITS: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_mask = offs_s < NUM_SPLITS
    d_mask = offs_d < HEAD_DIM
    rows = (b * NUM_HEADS + h).to(tl.int64) * NUM_SPLITS + offs_s
    lse = tl.load(mid_lse_ptr + rows, mask=s_mask, other=float("-inf"))
    o = tl.load(
        mid_o_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :],
        mask=s_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    valid = lse > float("-inf")
    m = tl.max(tl.where(valid, lse, NEG_BIG), axis=0)
    w = tl.where(valid, tl.exp(tl.where(valid, lse, m) - m), 0.0)
    denom = tl.sum(w, axis=0)
    merged = tl.sum(w[:, None] * o, axis=0) / tl.where(denom > 0.0, denom, 1.0)
    tl.store(
        out_ptr + b.to(tl.int64) * s_ob + h * s_oh + offs_d,
        cast_to(merged, out_ptr.dtype.element_ty),
        mask=d_mask,
    )


def decode_attention(
    q: Tensor,
    k_pool: Tensor,
    v_pool: Tensor,
    kv_indptr: Tensor,
    kv_indices: Tensor,
    scale: float,
    num_splits: int | None = None,
) -> Tensor:
    batch, nh, d = q.shape
    nkv = k_pool.shape[1]
    out = torch.empty_like(q)
    if batch == 0:
        return out
    num_splits = max(1, int(decode_splits() if num_splits is None else num_splits))
    q, k_pool, v_pool = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k_pool, v_pool))
    mid_o = torch.empty((batch, nh, num_splits, d), dtype=torch.float32, device=q.device)
    mid_lse = torch.empty((batch, nh, num_splits), dtype=torch.float32, device=q.device)
    group = nh // nkv
    block_d = block_size(d, 16)
    _decode_partial_kernel[(batch, nkv, num_splits)](
        q, k_pool, v_pool, kv_indptr.contiguous(), kv_indices.contiguous(), mid_o, mid_lse,
        float(scale), q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1),
        v_pool.stride(0), v_pool.stride(1),
        nh, d, GROUP=group, NUM_SPLITS=num_splits,
        BLOCK_G=block_size(group, 16), BLOCK_N=attention_tile(q.dtype), BLOCK_D=block_d,
        PRECISION=dot_precision(q.dtype),
    )  # fmt: skip
    _decode_merge_kernel[(batch, nh)](
        mid_o, mid_lse, out, out.stride(0), out.stride(1), nh, d,
        NUM_SPLITS=num_splits, BLOCK_S=block_size(num_splits), BLOCK_D=block_d,
    )  # fmt: skip
    return out
