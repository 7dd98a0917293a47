"""The engine's vectorized torch attention against the per-request reference."""

from __future__ import annotations

import pytest
import torch

from ppx.engine.kernels.testing import (
    assert_kernel_close,
    make_decode_case,
    make_extend_case,
    make_req_to_token,
)

GQA = [(4, 4), (4, 2), (8, 2)]


@pytest.mark.parametrize("heads", GQA)
@pytest.mark.parametrize(
    "ext,pre", [([5, 0, 37, 1], [0, 12, 18, 3]), ([9, 33], [0, 0]), ([3, 20], [40, 1])]
)
def test_batched_extend_matches_reference(ref, batched, heads, ext, pre):
    case = make_extend_case(ext, pre, *heads, head_dim=16, dtype=torch.float32)
    out = batched.extend_attention(*case.args())
    assert_kernel_close(out, ref.extend_attention(*case.args()), what="extend", cosine=True)


@pytest.mark.parametrize("heads", GQA)
@pytest.mark.parametrize("lens", [[1, 7, 30], [64], [3, 0, 5]])
def test_batched_decode_matches_reference(ref, batched, heads, lens):
    case = make_decode_case(lens, *heads, head_dim=16, dtype=torch.float32)
    out = batched.decode_attention(*case.args())
    assert_kernel_close(out, ref.decode_attention(*case.args()), what="decode", cosine=True)


def test_batched_kv_indices_match_reference(ref, batched):
    table = make_req_to_token(6, 40, 500)
    rows = torch.tensor([4, 0, 2])
    lens = torch.tensor([7, 0, 40])
    a, b = batched.build_kv_indices(table, rows, lens), ref.build_kv_indices(table, rows, lens)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_batched_extend_is_caught_when_causality_breaks(ref, batched):
    """Red arm: the harness rejects a result where the last new token is zeroed."""
    case = make_extend_case([6, 4], [3, 0], 4, 2, head_dim=16, dtype=torch.float32)
    out = batched.extend_attention(*case.args()).clone()
    out[-1] = 0
    with pytest.raises(AssertionError):
        assert_kernel_close(out, ref.extend_attention(*case.args()), what="extend", cosine=True)
