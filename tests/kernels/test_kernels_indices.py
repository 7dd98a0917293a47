"""build_kv_indices: the triton version must match the reference exactly."""

from __future__ import annotations

import pytest
import torch

from ppx.engine.kernels.testing import assert_kernel_close, make_req_to_token


@pytest.mark.parametrize(
    "rows,lens",
    [
        ([0], [1]),
        ([3, 0, 5, 1], [7, 0, 300, 1]),  # ragged, a zero-length row, one longer than a tile
        ([2, 2, 4], [5, 9, 0]),  # the same row twice (two views of one request)
        ([4, 1], [0, 0]),  # nothing to gather
    ],
)
def test_build_kv_indices(ref, tri, device, rows, lens):
    table = make_req_to_token(6, 320, pool_size=10_000, device=device)
    req_rows = torch.tensor(rows, dtype=torch.int64, device=device)
    kv_lens = torch.tensor(lens, dtype=torch.int64, device=device)
    (ptr, idx), (ptr_r, idx_r) = (
        tri.build_kv_indices(table, req_rows, kv_lens),
        ref.build_kv_indices(table, req_rows, kv_lens),
    )
    assert_kernel_close(ptr, ptr_r, what="kv_indptr")
    assert_kernel_close(idx, idx_r, what="kv_indices")
    assert ptr.dtype == idx.dtype == torch.int64
    # And the reference itself means what the contract says.
    expected = [table[r, :n].tolist() for r, n in zip(rows, lens, strict=True)]
    assert idx_r.tolist() == sum(expected, [])


def test_build_kv_indices_large_batch(ref, tri, device):
    # More requests than one scan tile of the indptr kernel, so the carry is exercised.
    gen = torch.Generator().manual_seed(3)
    batch = 1100
    table = make_req_to_token(batch, 8, pool_size=50_000, device=device)
    req_rows = torch.randperm(batch, generator=gen).to(device)
    kv_lens = torch.randint(0, 9, (batch,), generator=gen).to(device)
    out, expected = (
        tri.build_kv_indices(table, req_rows, kv_lens),
        ref.build_kv_indices(table, req_rows, kv_lens),
    )
    assert_kernel_close(out[0], expected[0], what="kv_indptr")
    assert_kernel_close(out[1], expected[1], what="kv_indices")


def test_build_kv_indices_empty_batch(tri, device):
    table = make_req_to_token(2, 4, pool_size=10, device=device)
    empty = torch.zeros(0, dtype=torch.int64, device=device)
    ptr, idx = tri.build_kv_indices(table, empty, empty)
    assert ptr.tolist() == [0] and idx.numel() == 0
