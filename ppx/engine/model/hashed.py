"""`model=hash`: a protocol-speed model whose tokens still depend on every rank's KV mapping.

A stage writes each new token's id into its KV pool (k) at the token's slot and, in v, the
token's prefix hash g (a position-weighted hash of the ids so far: what a real layer's KV is,
a function of the whole prefix, not of the token alone), chained from the g it reads back at
the previous position's slot through `req_to_token`. It then reads the request's whole prefix
back through the same mapping, (k, v) at every slot, and mixes a position-weighted hash of
them into an accumulator that travels to the next stage on the proxy ([T, 2] int64: token
id, accumulator; T rows like the real hidden states, so the width and fingerprint checks see
what they always see). The last stage samples `accumulator mod vocab`.

So a slot read through a wrong row, a stale slot (another id, or the same id with another
history), a permuted row or a row of another request changes the token; and the next token
is a pure function of the sequence, whatever pp, TP phase or batch, so the single-process
reference (one-hot logits) is what the oracle checks it against.

Every KV head holds that content, tagged with its global head index (k = id + vocab * head,
v = g + head * HEAD_V mod MOD): a TP shard's local head 0 is global head rank * kv_heads / tp,
so a carry across a cutover that puts another head's rows (or none) there changes the token,
as it would a real model's attention. (Before this, only local head 0 was written: a correct
PP->TP carry gave ranks 1.. the untouched global heads 4.. and the run mismatched.) A read
decodes every local head and poisons the slot's id when they disagree.

Values stay below 2^24 (`MOD`) so the float32 KV pool holds them exactly. A stage reads its
pool through a Python mirror of what each slot decodes to where it can trust one (the pools'
version counters: hash_mirror.py), through torch otherwise; the tokens are the same.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import cast

import torch

from ppx.core import ForwardInputs
from ppx.engine.int_tensor import int_tensor
from ppx.engine.model.hash_mirror import PoolMirror
from ppx.engine.model.weights import Dims

MOD = 16_777_213  # < 2^24: exact in float32; odd and prime to 3, so 1..4 have inverses


def _coeffs(seed: int, layers: int, max_context: int):
    """Per-layer mixing constants and the two position-weight vectors, from the seed."""
    g = torch.Generator().manual_seed(int(seed) * 7919 + 17)
    mix = torch.randint(1, MOD, (layers, 3), generator=g).tolist()
    w1 = torch.randint(1, MOD, (max_context,), generator=g)
    w2 = torch.randint(1, MOD, (max_context,), generator=g)
    return mix, w1, w2


def _compose(mix: list[list[int]], first: int, last: int) -> tuple[int, int, int]:
    """Layers first..last-1 as one affine map a -> A a + B f + C (mod MOD); every layer of a
    stage reads the same KV, so the stage is that one map whatever its length."""
    a, b, c = 1, 0, 0
    for al, be, ga in mix[first:last]:  # layer l: a -> al * a + be * f + ga
        a, b, c = al * a % MOD, (al * b + be) % MOD, (al * c + ga) % MOD
    return a, b, c


def _read_sums(ks: list[int], vs: list[int], w: list[int]) -> list[int]:
    """The running hash of a prefix read back as (id, prefix hash) per slot, before its mod:
    h[p] = sum over j <= p of (v[j] + ID * k[j] + 1) * w[j] (position-weighted: a
    permutation, an id or a history that differs at any slot changes it)."""
    return list(accumulate([(g + ID * t + 1) * wj for t, g, wj in zip(ks, vs, w)]))  # noqa: B905


def _read_hash(ks: list[int], vs: list[int], w: list[int]) -> list[int]:
    """h[p] mod MOD at every position (a stage needs it only at its new tokens' positions)."""
    return [h % MOD for h in _read_sums(ks, vs, w)]


ID = 1 << 24  # keeps a slot's id and its prefix hash apart in the read hash
HEAD_V = 7_654_321  # a head's tag in v (mod MOD); in k the tag is vocab * head (exact: < 2^24)


def head_tags(vocab: int, heads: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-head offsets [H] (int64) added to k and v of global heads `heads`."""
    gh = torch.tensor(heads, dtype=torch.int64)
    return gh * vocab, gh * HEAD_V % MOD


def _decode(rows: torch.Tensor, tag: torch.Tensor, mod: int | None) -> list[int]:
    """One value per slot from its local heads [n, H] (tags removed); a slot whose heads
    disagree reads as -1 - value (no id or hash is negative: the token changes). The heads
    agree where their min is their max: one torch call where an equality, an all and a
    where took three (each ~5 us on a tensor this small; the schedule's time is such calls)."""
    x = rows.to(torch.int64) - tag
    if mod is not None:
        x.remainder_(mod)
    lo, hi = x.aminmax(dim=1)
    return [f if a == b else -1 - f for f, a, b in zip(x[:, 0].tolist(), lo.tolist(), hi.tolist())]


SMALL_WRITE = 256  # values: up to here, a write's rows are built in Python (see _rows)


def _rows(values: list[int], tags: list[int], tag: torch.Tensor, mod: int | None, dtype):
    """[n, H] `dtype` rows of value + each head's tag (mod `mod`): what a slot's heads hold.
    A small write (a decode's few tokens) is built in Python over an array's buffer, one
    torch call where the tensor arithmetic took four; the values are those torch gives:
    each sum is an exact double below 2^53, rounded once to float32 as int64 -> float32 is."""
    n = len(values) * len(tags)
    small = 0 < n <= SMALL_WRITE  # (frombuffer refuses an empty buffer)
    if dtype == torch.float32 and small and all(abs(x) < 1 << 52 for x in values):
        if mod is None:
            flat = [x + t for x in values for t in tags]
        else:
            flat = [(x + t) % mod for x in values for t in tags]
        return torch.frombuffer(array("f", flat), dtype=torch.float32).view(len(values), -1)
    x = int_tensor(values)[:, None] + tag
    return (x if mod is None else x % mod).to(dtype)


@dataclass(frozen=True)
class HeadTags:
    """This rank's KV heads' tags (head_tags), as tensors for the torch path and as lists for
    the writes built in Python; `k_range` bounds the key tags (what the mirror trusts)."""

    k: torch.Tensor
    v: torch.Tensor
    k_list: list[int]
    v_list: list[int]
    k_range: tuple[int, int]

    @classmethod
    def of(cls, vocab: int, heads: list[int]) -> HeadTags:
        k, v = head_tags(vocab, heads)
        k_list, v_list = k.tolist(), v.tolist()
        return cls(k, v, k_list, v_list, (min(k_list), max(k_list)))


class HashStage:
    """Layers [first_layer, last_layer) of the hash model (every layer in the TP phase, where
    the ranks' prefix hashes are averaged through one all-reduce: a rank whose KV differs
    changes everyone's token)."""

    def __init__(
        self,
        d: Dims,
        seed: int,
        first_layer: int,
        last_layer: int,
        max_context: int,
        tp_size: int = 1,
        all_reduce=None,
        tp_rank: int = 0,
    ) -> None:
        self.d, self.first_layer, self.last_layer = d, first_layer, last_layer
        self.is_first, self.is_last = first_layer == 0, last_layer == d.layers
        self.tp_size, self.all_reduce = tp_size, all_reduce
        mix, w1, w2 = _coeffs(seed, d.layers, max_context)
        self.w1, self.w2 = w1.tolist(), w2.tolist()
        self.affine = _compose(mix, first_layer, last_layer)
        self.inv_tp = pow(tp_size, -1, MOD)
        local = d.kv_heads // tp_size  # this rank's KV heads (a TP shard, or all of them)
        self.tags = HeadTags.of(d.vocab, list(range(tp_rank * local, (tp_rank + 1) * local)))
        self.mirror = PoolMirror()  # what its pool decodes to, per slot (hash_mirror.py)
        self.weight_bytes = 0
        self.bytes_read = 0

    num_layers = 1  # one KV "layer": the ids (k) and the prefix hashes (v)

    def tensors(self) -> list[torch.Tensor]:
        return []

    def forward(
        self,
        fi: ForwardInputs,
        k_pool: list[torch.Tensor],
        v_pool: list[torch.Tensor],
        req_to_token: torch.Tensor,
    ) -> torch.Tensor:
        """Returns [T, 2] int64 (token id, accumulator), or sampled ids [B'] on the last stage.
        A batch is a few requests of tens of tokens: plain Python over lists costs less than
        the tens of tiny torch calls a vectorised version makes."""
        if self.is_first:
            assert fi.input_ids is not None, "stage 0 reads token ids"
            ids = fi.input_ids.tolist()
            acc = ids
        else:
            assert fi.hidden is not None, "a later stage reads the previous stage's (id, acc)"
            ids, acc = fi.hidden.T.tolist()
        qo, pos = fi.qo_indptr.tolist(), fi.positions.tolist()
        prefix = fi.prefix_lens.tolist()
        rows = [
            req_to_token[r, : p + qo[b + 1] - qo[b]].tolist()
            for b, (r, p) in enumerate(zip(fi.req_rows.tolist(), prefix, strict=True))
        ]
        loc = fi.out_cache_loc
        tags = self.tags
        k_tag, v_tag = tags.k, tags.v

        def read_k(slots: list[int]) -> list[int]:
            return _decode(k[int_tensor(slots)], k_tag, None)

        def read_v(slots: list[int]) -> list[int]:
            return _decode(v[int_tensor(slots)], v_tag, MOD)

        if self.mirror.bind(k_pool[0], v_pool[0]):
            mirror = self.mirror
            # bound: the rows are the pool's views (cast, not assert: this is the hot path)
            k, v = cast(torch.Tensor, mirror.k_rows), cast(torch.Tensor, mirror.v_rows)
        else:
            mirror = None
            k, v = k_pool[0][:, :, 0], v_pool[0][:, :, 0]  # [slots, local KV heads]
        k[loc] = _rows(ids, tags.k_list, k_tag, None, k.dtype)
        if mirror is not None:  # from here on, reads of what this stage wrote make no torch call
            written = loc.tolist()
            mirror.wrote_ids(written, ids, *tags.k_range)
        # each chunk's prefix hash chains from the one stored at the slot before it (read
        # through the mapping: a stale or foreign slot there changes every g after it)
        before = [row[p - 1] for row, p in zip(rows, prefix, strict=True) if p > 0]
        stored: Iterator[int]
        if not before:
            stored = iter([])
        else:
            stored = iter(mirror.read_hashes(before, read_v) if mirror else read_v(before))
        g = []
        for b, p in enumerate(prefix):
            h = next(stored) if p > 0 else 0
            for i in range(qo[b], qo[b + 1]):
                h = (h + (ids[i] + 1) * self.w1[pos[i]]) % MOD
                g.append(h)
        v[loc] = _rows(g, tags.v_list, v_tag, MOD, v.dtype)
        where = [s for row in rows for s in row]
        if mirror is not None:
            mirror.wrote_hashes(written, g)
            ks, vs = mirror.read_ids(where, read_k), mirror.read_hashes(where, read_v)
            mirror.seal()
        else:
            ks, vs = read_k(where), read_v(where)
        f, at = [], 0
        for b, row in enumerate(rows):
            sums = _read_sums(ks[at : at + len(row)], vs[at : at + len(row)], self.w2)
            f += [sums[pos[i]] % MOD for i in range(qo[b], qo[b + 1])]
            at += len(row)
        if self.tp_size > 1:  # every shard's own KV counts: mean of the ranks' hashes
            total = self.all_reduce(torch.tensor(f, dtype=torch.int64)).tolist()
            f = [x % MOD * self.inv_tp % MOD for x in total]
        a, b, c = self.affine
        acc = [(x * a + y * b + c) % MOD for x, y in zip(acc, f, strict=True)]
        if self.is_last:
            vocab = self.d.vocab
            return int_tensor([acc[i] % vocab for i in fi.sample_rows.tolist()])
        return int_tensor([x for pair in zip(ids, acc) for x in pair]).view(len(ids), 2)


class HashReference:
    """The hash model in one process over a plain sequence: the oracle's ground truth, as
    one-hot logits (margin 1 between the right token and any other)."""

    def __init__(self, d: Dims, seed: int, max_context: int) -> None:
        self.d = d
        mix, w1, w2 = _coeffs(seed, d.layers, max_context)
        self.w1, self.w2 = w1.tolist(), w2.tolist()
        self.affine = _compose(mix, 0, d.layers)

    def prefix_hashes(self, tokens: list[int]) -> list[int]:
        """g at every position: what a stage stores in v for the prefix ending there."""
        terms = [(t + 1) * w for t, w in zip(tokens, self.w1)]  # noqa: B905
        return [h % MOD for h in accumulate(terms)]

    def next_ids(self, tokens: list[int]) -> torch.Tensor:
        g = self.prefix_hashes(tokens)
        f = _read_hash(tokens, g, self.w2)
        a, b, c = self.affine
        vocab = self.d.vocab
        return torch.tensor([(t * a + x * b + c) % MOD % vocab for t, x in zip(tokens, f)])

    def kv(self, tokens: list[int], first: int, last: int, heads: range) -> torch.Tensor:
        """What a fresh prefill of `tokens` writes into the pool of a stage holding KV heads
        `heads`: [1, 2, L, H, head_dim] (the hash model keeps one KV layer per stage, so
        the layer range does not slice it)."""
        g = self.prefix_hashes(tokens)
        k_tag, v_tag = head_tags(self.d.vocab, list(heads))
        out = torch.zeros(1, 2, len(tokens), len(heads), self.d.head_dim)
        out[0, 0, :, :, 0] = (torch.tensor(tokens, dtype=torch.int64)[:, None] + k_tag).float()
        out[0, 1, :, :, 0] = ((torch.tensor(g, dtype=torch.int64)[:, None] + v_tag) % MOD).float()
        return out

    def logits(self, tokens: list[int]) -> torch.Tensor:
        """Logits [L, V] for every position of one sequence (teacher forcing)."""
        return torch.nn.functional.one_hot(self.next_ids(tokens), self.d.vocab).float()

    def greedy(self, prompt: list[int], max_new: int) -> list[int]:
        out: list[int] = []
        for _ in range(max_new):
            out.append(int(self.next_ids(prompt + out)[-1]))
        return out
