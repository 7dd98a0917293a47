"""Vectorized torch attention for the engine's `torch` backend.

`torch_ref` loops over requests in Python for clarity; the engine runs these instead: the
ragged batch is padded into one tensor and masked, so a pass costs a handful of ops per layer
however many requests it holds. Tested against `torch_ref` like the triton kernels.
"""

from __future__ import annotations

import torch
from torch import Tensor


def build_kv_indices(
    req_to_token: Tensor, req_rows: Tensor, kv_lens: Tensor
) -> tuple[Tensor, Tensor]:
    lens = kv_lens.to(torch.int64)
    indptr = torch.zeros(lens.numel() + 1, dtype=torch.int64, device=lens.device)
    indptr[1:] = torch.cumsum(lens, 0)
    if lens.numel() == 0 or int(indptr[-1]) == 0:
        return indptr, torch.zeros(0, dtype=torch.int64, device=lens.device)
    width = int(lens.max())
    cols = torch.arange(width, device=lens.device)
    valid = cols[None, :] < lens[:, None]
    table = req_to_token[req_rows.to(torch.int64), :width].to(torch.int64)
    return indptr, table[valid]


def _softmax_attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, scale: float) -> Tensor:
    """q [B, M, nh, d]; k, v [B, N, nkv, d]; mask [B, M, N] -> [B, M, nh, d] (fp32 math)."""
    b, m, nh, d = q.shape
    nkv = k.shape[2]
    qg = q.float().view(b, m, nkv, nh // nkv, d)
    scores = torch.einsum("bmgrd,bngd->bgrmn", qg, k.float()) * scale
    scores = scores.masked_fill(~mask[:, None, None], float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # fully masked (padding) rows
    out = torch.einsum("bgrmn,bngd->bmgrd", probs, v.float())
    return out.reshape(b, m, nh, d)


def decode_attention(
    q: Tensor,
    k_pool: Tensor,
    v_pool: Tensor,
    kv_indptr: Tensor,
    kv_indices: Tensor,
    scale: float,
    num_splits: int | None = None,
) -> Tensor:
    del num_splits  # a triton tuning knob; the result does not depend on it
    lens = kv_indptr[1:] - kv_indptr[:-1]
    if q.shape[0] == 0 or int(lens.max()) == 0:
        return torch.zeros_like(q)
    width = int(lens.max())
    cols = torch.arange(width, device=q.device)
    valid = cols[None, :] < lens[:, None]
    idx = kv_indices[
        (kv_indptr[:-1, None] + cols[None, :]).clamp(max=max(kv_indices.numel() - 1, 0))
    ]
    out = _softmax_attend(q[:, None], k_pool[idx], v_pool[idx], valid[:, None, :], scale)
    return out[:, 0].to(q.dtype)


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
    dev = q.device
    n_new = qo_indptr[1:] - qo_indptr[:-1]
    n_pre = prefix_indptr[1:] - prefix_indptr[:-1]
    if q.shape[0] == 0:
        return torch.zeros_like(q)
    tmax, kmax = int(n_new.max()), int((n_new + n_pre).max())
    rows = torch.arange(tmax, device=dev)
    cols = torch.arange(kmax, device=dev)
    q_valid = rows[None, :] < n_new[:, None]  # [B, Tmax]
    q_idx = (qo_indptr[:-1, None] + rows[None, :]).clamp(max=q.shape[0] - 1)
    is_pre = cols[None, :] < n_pre[:, None]  # [B, Kmax]
    is_new = ~is_pre & (cols[None, :] < (n_pre + n_new)[:, None])
    pre_idx = (prefix_indptr[:-1, None] + cols[None, :]).clamp(
        max=max(prefix_indices.numel() - 1, 0)
    )
    new_idx = (qo_indptr[:-1, None] + cols[None, :] - n_pre[:, None]).clamp(0, q.shape[0] - 1)
    b = n_new.numel()
    keys = torch.zeros((b, kmax, *k_new.shape[1:]), dtype=k_new.dtype, device=dev)
    vals = torch.zeros_like(keys)
    if prefix_indices.numel():
        slots = prefix_indices[pre_idx]
        keys[is_pre] = k_pool[slots[is_pre]].to(k_new.dtype)
        vals[is_pre] = v_pool[slots[is_pre]].to(v_new.dtype)
    keys[is_new] = k_new[new_idx[is_new]]
    vals[is_new] = v_new[new_idx[is_new]]
    # new token j of request b sees every prefix column and new columns 0..j
    causal = cols[None, None, :] <= (n_pre[:, None, None] + rows[None, :, None])
    mask = causal & (is_pre | is_new)[:, None, :] & q_valid[:, :, None]
    out = _softmax_attend(q[q_idx], keys, vals, mask, scale)
    result = torch.zeros_like(q)
    result[q_idx[q_valid]] = out[q_valid].to(q.dtype)
    return result
