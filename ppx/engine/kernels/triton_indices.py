"""Triton kernel that flattens a batch's KV slots from ``req_to_token`` into CSR form."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from ppx.engine.kernels.triton_common import block_size


@triton.jit
def _indptr_kernel(kv_lens_ptr, indptr_ptr, B, BLOCK: tl.constexpr):
    # A single program scans the batch in tiles and carries the running total between them:
    # batches are at most a few thousand requests, so one program is cheaper than a
    # multi-pass parallel scan. indptr[0] is already zero (the host allocates with zeros).
    carry = tl.load(indptr_ptr)  # an int64 zero, so the carried total is 64-bit
    for start in range(0, B, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        lens = tl.load(kv_lens_ptr + offs, mask=offs < B, other=0).to(tl.int64)
        tl.store(indptr_ptr + 1 + offs, carry + tl.cumsum(lens, axis=0), mask=offs < B)
        carry += tl.sum(lens, axis=0)


@triton.jit
def _gather_kernel(
    req_to_token_ptr,
    stride_row,
    req_rows_ptr,
    kv_lens_ptr,
    indptr_ptr,
    indices_ptr,
    BLOCK: tl.constexpr,
):
    # One program per request copies its row prefix; the loop bound is read from memory, so
    # no host-side max(kv_lens) is needed to size the grid.
    b = tl.program_id(0)
    row = tl.load(req_rows_ptr + b).to(tl.int64)
    n = tl.load(kv_lens_ptr + b).to(tl.int64)
    dst = tl.load(indptr_ptr + b)
    src = req_to_token_ptr + row * stride_row
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        slots = tl.load(src + offs, mask=mask, other=0)
        tl.store(indices_ptr + dst + offs, slots.to(tl.int64), mask=mask)


def build_kv_indices(
    req_to_token: Tensor, req_rows: Tensor, kv_lens: Tensor
) -> tuple[Tensor, Tensor]:
    device = kv_lens.device
    batch = kv_lens.numel()
    kv_indptr = torch.zeros(batch + 1, dtype=torch.int64, device=device)
    if batch == 0:
        return kv_indptr, torch.zeros(0, dtype=torch.int64, device=device)
    kv_lens = kv_lens.contiguous()
    _indptr_kernel[(1,)](kv_lens, kv_indptr, batch, BLOCK=min(block_size(batch), 1024))
    # The output length is data-dependent, so one device->host sync is unavoidable here.
    total = int(kv_indptr[-1].item())
    kv_indices = torch.empty(total, dtype=torch.int64, device=device)
    if total == 0:
        return kv_indptr, kv_indices
    if req_to_token.stride(-1) != 1:
        req_to_token = req_to_token.contiguous()
    _gather_kernel[(batch,)](
        req_to_token,
        req_to_token.stride(0),
        req_rows.contiguous(),
        kv_lens,
        kv_indptr,
        kv_indices,
        BLOCK=256,
    )
    return kv_indptr, kv_indices
