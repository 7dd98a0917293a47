"""The hot-path shortcuts produce exactly what the general code produced.

Each shortcut (docs/performance.md) is checked against the general path it replaces: a red
arm shows the check would see a difference.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from ppx_helpers import upstream_rule

from ppx.core import Kind, Message, Req
from ppx.engine.admission.prefill import LocalPrefill
from ppx.engine.cache.kv import KVCache
from ppx.engine.channels import HEADER_LEN, decode_header, encode_header
from ppx.engine.int_tensor import int_tensor
from ppx.engine.scheduler import Scheduler


class _Ctx:
    def __init__(self, sched):
        self.sched = sched


def _decoding(n: int = 5, chunk: int = 64) -> tuple[Scheduler, LocalPrefill]:
    """A scheduler whose slot 0 holds `n` decoding requests of different lengths."""
    s = Scheduler(KVCache(1, 512, 1, 2, 8, 128), 1, chunk, 8)
    pol = upstream_rule(_Ctx(s))
    s.add([Req(i, list(range(1, 4 + 2 * i)), max_new=6) for i in range(n)])
    b = pol.form(0, 0)
    s.after_launch(b)
    s.apply_output(0, [7] * n)
    return s, pol


def _general_inputs(s: Scheduler, batch, first: bool):
    """The general path, as before the decode shortcut (a prefill-shaped copy of the batch)."""
    return s.inputs(dataclasses.replace(batch, mode="prefill"), first)


def _same(a, b) -> bool:
    fields = ("positions", "qo_indptr", "prefix_lens", "req_rows", "out_cache_loc", "sample_rows")
    same = all(torch.equal(getattr(a, f), getattr(b, f)) for f in fields)
    if a.input_ids is None or b.input_ids is None:
        return same and a.input_ids is b.input_ids
    return same and torch.equal(a.input_ids, b.input_ids)


@pytest.mark.parametrize("first", [True, False])
def test_decode_inputs_equal_the_general_path(first):
    s, pol = _decoding()
    d = pol.form(0, 1)
    assert d.mode == "decode"
    fast = s.inputs(d, first)
    assert _same(fast, _general_inputs(s, d, first))
    assert fast.input_ids is None or fast.input_ids.tolist() == [7] * 5


def test_decode_inputs_red_arm_a_different_token_is_seen():
    s, pol = _decoding()
    d = pol.form(0, 1)
    fast = s.inputs(d, True)
    s.reqs[d.entries[0].rid].output[-1] = 99  # the general path now reads another token
    assert not _same(fast, _general_inputs(s, d, True))


def _rows_after_decode(batched: bool) -> torch.Tensor:
    s, pol = _decoding()
    if not batched:  # the per-request writes, as before `batched_rows`
        s.cache.batched_rows = _unbatched
    pol.form(0, 1)
    return s.cache.req_to_token.clone()


class _unbatched:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_batched_rows_write_what_per_request_writes_wrote():
    assert torch.equal(_rows_after_decode(True), _rows_after_decode(False))


def test_batched_rows_red_arm_and_write_even_when_an_extend_fails():
    s, pol = _decoding()
    before = s.cache.req_to_token.clone()
    req = s.reqs[0]
    with pytest.raises(RuntimeError):
        with s.cache.batched_rows():
            s.cache.extend(req, 1)
            raise RuntimeError("a later extend failed")
    after = s.cache.req_to_token
    assert not torch.equal(before, after)  # the first extend's slot is in the row
    assert int(after[req.row, req.computed - 1]) == s.cache.rows[req.rid][-1]


def _reference_header(msg: Message) -> list[int]:
    """The header layout, field by field (what the encoder built before it was one list)."""
    h = [0] * HEADER_LEN
    h[:7] = [msg.kind, msg.slot, msg.pass_id, msg.epoch, msg.seq, msg.flags, msg.num_tensors]
    for i, a in enumerate(msg.aux):
        h[8 + i] = a
    codes = {torch.int64: 0, torch.float32: 1}
    for i, t in enumerate(msg.tensors):
        h[12 + 4 * i : 16 + 4 * i] = [codes[t.dtype], *t.shape] + [-1] * (3 - t.dim())
    return h


@pytest.mark.parametrize(
    "msg",
    [
        Message(Kind.CHAIN, 0, 8, 1, 3, 2),
        Message(Kind.DECISION, 2, 9, 0, 5, 16, (1, 3, 77)),
        Message(
            Kind.PROXY, 1, 4, 0, 0, 0, (), [torch.zeros(3, 4), torch.zeros(6, dtype=torch.int64)]
        ),
    ],
)
def test_header_layout_and_round_trip(msg):
    h = encode_header(msg)
    assert h == _reference_header(msg) and int_tensor(h).tolist() == h  # int64 on a tensor wire
    back, metas = decode_header(h)
    assert (back.kind, back.slot, back.pass_id, back.epoch, back.seq, back.flags) == (
        msg.kind,
        msg.slot,
        msg.pass_id,
        msg.epoch,
        msg.seq,
        msg.flags,
    )
    assert back.aux[: len(msg.aux)] == msg.aux
    assert metas == [(t.dtype, list(t.shape)) for t in msg.tensors]


def test_header_red_arm_a_wrong_field_is_seen():
    msg = Message(Kind.DECISION, 2, 9, 0, 5, 16, (1, 3, 77))
    h = encode_header(msg)
    h[9] += 1
    assert h != _reference_header(msg)


INT_LISTS = [[3, 1, 2], [], [2**40, -5, 0], list(range(100))]


@pytest.mark.parametrize("values", INT_LISTS)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_int_tensor_equals_torch_tensor(values, dtype):
    from ppx.engine.int_tensor import int_tensor

    if dtype == torch.int32 and any(abs(v) >= 2**31 for v in values):
        values = [v % 2**31 for v in values]
    got, want = int_tensor(values, dtype), torch.tensor(values, dtype=dtype)
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    got[:1] = 7  # a fresh buffer: writable, shared with nothing else
    assert torch.equal(int_tensor(values, dtype), want)


def test_int_tensor_red_arm_a_wrong_dtype_or_value_is_seen():
    from ppx.engine.int_tensor import int_tensor

    want = torch.tensor([1, 2, 3], dtype=torch.int64)
    assert int_tensor([1, 2, 3], torch.int32).dtype != want.dtype
    assert not torch.equal(int_tensor([1, 2, 4]), want)


def test_batched_rows_with_only_empty_extends_write_nothing():
    # a pass whose every extend is zero tokens (the #797c red at 2 requests, max_new 1):
    # `torch.tensor([])` is a float tensor, and indexing with it crashed rank 0 (IndexError)
    s, _ = _decoding()
    before = s.cache.req_to_token.clone()
    with s.cache.batched_rows():
        s.cache.extend(s.reqs[0], 0)
    assert torch.equal(before, s.cache.req_to_token)
