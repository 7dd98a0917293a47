"""Reference kernels in plain torch.

These favour clarity over speed: attention loops over requests in Python. Every kernel
computes in fp32 and casts the result back to the input dtype once, so the triton kernels
can be held to a tolerance of a couple of ulps of the output dtype.
"""

from __future__ import annotations

import torch
from torch import Tensor


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` per row of ``x[T, H]``."""
    xf = x.float()
    inv_rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * inv_rms * weight.float()).to(x.dtype)


def rope_inv_freq(head_dim: int, theta: float, device: torch.device) -> Tensor:
    """``1 / theta^(2i/d)`` in fp32; shared with the triton kernel so both see equal bits."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim
    return 1.0 / (theta**exponents)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # NeoX layout: the rotation pairs element i with element i + d/2 (not 2i with 2i+1).
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    return out.to(x.dtype)


def rope(q: Tensor, k: Tensor, positions: Tensor, theta: float) -> tuple[Tensor, Tensor]:
    """Rotary embedding of ``q[T, nh, d]`` and ``k[T, nkv, d]``; returns new tensors."""
    inv_freq = rope_inv_freq(q.shape[-1], theta, q.device)
    freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]  # [T, d/2]
    cos, sin = freqs.cos()[:, None, :], freqs.sin()[:, None, :]  # broadcast over heads
    return _rotate(q, cos, sin), _rotate(k, cos, sin)


def silu_and_mul(x: Tensor) -> Tensor:
    """``silu(x[:, :I]) * x[:, I:]`` for ``x[T, 2I]``."""
    half = x.shape[-1] // 2
    xf = x.float()
    return (torch.nn.functional.silu(xf[:, :half]) * xf[:, half:]).to(x.dtype)


def build_kv_indices(
    req_to_token: Tensor, req_rows: Tensor, kv_lens: Tensor
) -> tuple[Tensor, Tensor]:
    """CSR layout of the KV slots of a batch: ``(kv_indptr[B+1], kv_indices[sum kv_lens])``."""
    kv_indptr = torch.zeros(kv_lens.numel() + 1, dtype=torch.int64, device=kv_lens.device)
    kv_indptr[1:] = torch.cumsum(kv_lens.to(torch.int64), dim=0)
    rows = [
        req_to_token[int(r), : int(n)].to(torch.int64)
        for r, n in zip(req_rows.tolist(), kv_lens.tolist(), strict=True)
    ]
    if not rows:
        return kv_indptr, torch.zeros(0, dtype=torch.int64, device=kv_lens.device)
    return kv_indptr, torch.cat(rows)


def _expand_kv(kv: Tensor, num_heads: int) -> Tensor:
    """``[L, nkv, d] -> [L, nh, d]``: GQA head h reads kv head ``h // (nh // nkv)``."""
    return kv.repeat_interleave(num_heads // kv.shape[1], dim=1)


def _attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float) -> Tensor:
    """Softmax attention in fp32. ``q[M, nh, d]``, ``k/v[N, nh, d]``, ``mask[M, N]`` bool."""
    scores = torch.einsum("mhd,nhd->hmn", q.float(), k.float()) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask[None], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("hmn,nhd->mhd", probs, v.float())


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
    """Prefill/extend attention: new tokens see the whole cached prefix plus a causal window."""
    num_heads = q.shape[1]
    out = torch.zeros_like(q)
    qo, pre = qo_indptr.tolist(), prefix_indptr.tolist()
    for b in range(len(qo) - 1):
        q0, q1 = qo[b], qo[b + 1]
        n_new = q1 - q0
        if n_new == 0:
            continue  # a request whose tokens are all cached has nothing to compute here
        idx = prefix_indices[pre[b] : pre[b + 1]]
        n_pre = idx.numel()
        k = torch.cat((k_pool[idx], k_new[q0:q1]))
        v = torch.cat((v_pool[idx], v_new[q0:q1]))
        # Row j (a new token) sees every prefix column and new columns 0..j.
        cols = torch.arange(n_pre + n_new, device=q.device)
        mask = cols[None, :] <= (n_pre + torch.arange(n_new, device=q.device))[:, None]
        attn = _attend(q[q0:q1], _expand_kv(k, num_heads), _expand_kv(v, num_heads), mask, scale)
        out[q0:q1] = attn.to(q.dtype)
    return out


def decode_attention(
    q: Tensor,
    k_pool: Tensor,
    v_pool: Tensor,
    kv_indptr: Tensor,
    kv_indices: Tensor,
    scale: float,
    num_splits: int | None = None,
) -> Tensor:
    """One query per request over all of its KV slots. ``num_splits`` is a triton tuning knob
    and is ignored here: splitting does not change the mathematical result."""
    del num_splits
    num_heads = q.shape[1]
    out = torch.zeros_like(q)
    ptr = kv_indptr.tolist()
    for b in range(q.shape[0]):
        idx = kv_indices[ptr[b] : ptr[b + 1]]
        if idx.numel() == 0:
            continue
        k, v = _expand_kv(k_pool[idx], num_heads), _expand_kv(v_pool[idx], num_heads)
        out[b] = _attend(q[b : b + 1], k, v, None, scale)[0].to(q.dtype)
    return out
