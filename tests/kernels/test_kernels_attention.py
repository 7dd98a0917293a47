"""Extend (prefill) and split-KV decode attention: triton vs the torch reference."""

from __future__ import annotations

import pytest
import torch

from ppx.engine.kernels.testing import (
    assert_kernel_close,
    make_decode_case,
    make_extend_case,
    make_req_to_token,
)

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (num_heads, num_kv_heads): GQA ratios 1, 2 and 4.
GQA = [(4, 4), (4, 2), (8, 2)]
GQA_IDS = ["gqa1", "gqa2", "gqa4"]

EXTEND_BATCHES = {
    # ragged; request 1 is fully cached (prefix covers everything, 0 new tokens)
    "ragged": ([5, 0, 37, 1], [0, 12, 18, 3]),
    "no-prefix": ([9, 33], [0, 0]),
    "long-prefix": ([3, 20], [40, 1]),
}


def _matrix(dtypes: list[torch.dtype], others: list, full: object) -> list:
    """fp32 and bf16 against every variant; fp16 (same code path as bf16 but for the
    dtype) only against ``full``, to keep the interpreted suite fast."""
    return [
        pytest.param(dt, o, id=f"{o}-{dt}")
        for dt in dtypes
        for o in others
        if dt != torch.float16 or o == full
    ]


@pytest.mark.parametrize("heads", GQA, ids=GQA_IDS)
@pytest.mark.parametrize("dtype,batch", _matrix(DTYPES, list(EXTEND_BATCHES), "ragged"))
def test_extend_attention(ref, tri, device, dtype, heads, batch):
    ext, pre = EXTEND_BATCHES[batch]
    case = make_extend_case(ext, pre, *heads, head_dim=32, dtype=dtype, device=device)
    out = tri.extend_attention(*case.args())
    assert_kernel_close(out, ref.extend_attention(*case.args()), what="extend", cosine=True)


def test_extend_attention_odd_head_dim(ref, tri, device):
    # head_dim 24 is padded to a 32-wide tile; the padding must stay masked.
    case = make_extend_case([6, 11], [4, 0], 4, 2, head_dim=24, dtype=torch.float32, device=device)
    out = tri.extend_attention(*case.args())
    assert_kernel_close(out, ref.extend_attention(*case.args()), what="extend d=24")


def test_extend_attention_views_of_fused_qkv(ref, tri, device):
    # q/k/v as strided views of one projection output, with an empty prefix and empty pool.
    t, nh, nkv, d = 7, 4, 2, 16
    qkv = torch.randn(t, (nh + 2 * nkv) * d, generator=torch.Generator().manual_seed(5))
    qkv = qkv.to(device)
    q = qkv[:, : nh * d].view(t, nh, d)
    k = qkv[:, nh * d : (nh + nkv) * d].view(t, nkv, d)
    v = qkv[:, (nh + nkv) * d :].view(t, nkv, d)
    pool = torch.empty(0, nkv, d, device=device)
    ptr = torch.tensor([0, t], device=device)
    no_prefix = torch.zeros(2, dtype=torch.int64, device=device)
    args = (q, k, v, pool, pool, ptr, no_prefix, no_prefix[:0], d**-0.5)
    assert_kernel_close(tri.extend_attention(*args), ref.extend_attention(*args), what="qkv")


def test_extend_attention_all_cached(ref, tri, device):
    # Every request is fully cached: no new tokens anywhere, so nothing to compute.
    case = make_extend_case([0, 0], [5, 3], 4, 2, head_dim=16, dtype=torch.float32, device=device)
    out = tri.extend_attention(*case.args())
    assert out.shape == (0, 4, 16)
    assert_kernel_close(out, ref.extend_attention(*case.args()), what="extend empty")


@pytest.mark.parametrize("heads", GQA, ids=GQA_IDS)
@pytest.mark.parametrize("dtype,num_splits", _matrix(DTYPES, [1, 5], 5))
def test_decode_attention(ref, tri, device, dtype, heads, num_splits):
    # kv_len 1 and 3 are shorter than 5 splits: some splits are empty and must be ignored;
    # 40 and 70 do not divide evenly, so the last split is short.
    case = make_decode_case([1, 3, 40, 70], *heads, head_dim=32, dtype=dtype, device=device)
    out = tri.decode_attention(*case.args(), num_splits=num_splits)
    expected = ref.decode_attention(*case.args())
    assert_kernel_close(out, expected, what=f"decode splits={num_splits}", cosine=True)


def test_decode_attention_empty_request_is_zero(ref, tri, device):
    case = make_decode_case([0, 5], 4, 4, head_dim=16, dtype=torch.float32, device=device)
    out = tri.decode_attention(*case.args())
    assert_kernel_close(out, ref.decode_attention(*case.args()), what="decode empty")
    assert torch.count_nonzero(out[0]) == 0


def test_decode_through_build_kv_indices(ref, tri, device):
    # The engine's decode path: req_to_token -> (indptr, indices) -> decode attention.
    nh, nkv, d, pool = 8, 2, 32, 400
    table = make_req_to_token(5, 64, pool_size=pool, device=device)
    req_rows = torch.tensor([4, 1, 2], dtype=torch.int64, device=device)
    kv_lens = torch.tensor([64, 2, 31], dtype=torch.int64, device=device)
    ptr, idx = tri.build_kv_indices(table, req_rows, kv_lens)
    case = make_decode_case([0] * 3, nh, nkv, d, torch.bfloat16, device=device)
    gen = torch.Generator().manual_seed(9)
    k_pool, v_pool = (
        torch.randn(pool, nkv, d, generator=gen).to(device, torch.bfloat16) for _ in "kv"
    )
    args = (case.q, k_pool, v_pool, ptr, idx, case.scale)
    assert_kernel_close(
        tri.decode_attention(*args), ref.decode_attention(*args), what="decode", cosine=True
    )


# --- red arm: the harness must reject kernels that are wrong -----------------------------


def test_harness_rejects_perturbed_scale_fp32(ref, device):
    case = make_decode_case([9, 33], 4, 2, head_dim=32, dtype=torch.float32, device=device)
    good = ref.decode_attention(*case.args())
    bad = ref.decode_attention(*case.args()[:-1], case.scale * 1.001)
    with pytest.raises(AssertionError):
        assert_kernel_close(bad, good, what="perturbed decode")


def test_harness_rejects_wrong_triton_kernel_bf16(ref, tri, device):
    # A triton kernel fed a 5% wrong softmax scale stands in for a buggy kernel.
    case = make_extend_case([5, 20], [7, 0], 4, 2, head_dim=32, dtype=torch.bfloat16, device=device)
    bad = tri.extend_attention(*case.args()[:-1], case.scale * 1.05)
    with pytest.raises(AssertionError):
        assert_kernel_close(bad, ref.extend_attention(*case.args()), what="bad", cosine=True)


def test_harness_rejects_missing_causal_mask(ref, device):
    # Letting every new token see every other new token (no causal mask) is a classic bug.
    case = make_extend_case([6], [0], 4, 4, head_dim=16, dtype=torch.float16, device=device)
    q, k, v = (x.float() for x in (case.q, case.k_new, case.v_new))
    probs = torch.softmax(torch.einsum("mhd,nhd->hmn", q, k) * case.scale, dim=-1)
    bad = torch.einsum("hmn,nhd->mhd", probs, v).to(case.q.dtype)
    with pytest.raises(AssertionError):
        assert_kernel_close(bad, ref.extend_attention(*case.args()), what="no causal mask")


def test_harness_rejects_off_by_one_indices(ref, tri, device):
    table = make_req_to_token(3, 16, pool_size=100, device=device)
    rows = torch.tensor([0, 2], dtype=torch.int64, device=device)
    lens = torch.tensor([4, 9], dtype=torch.int64, device=device)
    _, idx = tri.build_kv_indices(table, rows, lens)
    _, idx_r = ref.build_kv_indices(table, rows, lens)
    with pytest.raises(AssertionError):
        assert_kernel_close(idx + 1, idx_r, what="off by one")
