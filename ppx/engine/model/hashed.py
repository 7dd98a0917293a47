"""`model=hash`: a protocol-speed model whose tokens still depend on every rank's KV mapping.

A stage writes each new token's id into its KV pool (k) at the token's slot, reads the
request's prefix back through `req_to_token` (the same CSR indices the attention kernels
use), and stores in v a position-weighted hash of the ids it read: what a real layer's KV
is, a function of the whole prefix, not of the token alone. The stage's output for a token
mixes a second hash, of the v values read back through the same mapping, into an
accumulator that travels to the next stage on the proxy ([T, 2] int64: token id,
accumulator; T rows like the real hidden states, so the width and fingerprint checks see
what they always see). The last stage samples `accumulator mod vocab`.

So a slot read through a wrong row, a stale slot (another token, or the same token with
another history), a permuted row or a row of another request changes the token; and the
next token is a pure function of the sequence, whatever pp, TP phase or batch, so the
single-process reference (one-hot logits) is what the oracle checks it against.

Values stay below 2^24 (`MOD`) so the float32 KV pool holds them exactly.
"""

from __future__ import annotations

from itertools import accumulate

import torch

from ppx.core import ForwardInputs
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


def _hashes(vals: list[float], lens: list[int], w: list[int]) -> list[list[int]]:
    """Per sequence (`vals` holds them back to back, `lens` long), the running hash of its
    values: h[p] = sum over j <= p of (vals[j] + 1) * w[j] mod MOD (position-weighted, so a
    permutation changes it)."""
    out, i = [], 0
    for n in lens:
        terms = [(int(x) + 1) * wj for x, wj in zip(vals[i : i + n], w)]  # noqa: B905
        out.append([h % MOD for h in accumulate(terms)])
        i += n
    return out


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
    ) -> None:
        self.d, self.first_layer, self.last_layer = d, first_layer, last_layer
        self.is_first, self.is_last = first_layer == 0, last_layer == d.layers
        self.tp_size, self.all_reduce = tp_size, all_reduce
        mix, w1, w2 = _coeffs(seed, d.layers, max_context)
        self.w1, self.w2 = w1.tolist(), w2.tolist()
        self.affine = _compose(mix, first_layer, last_layer)
        self.inv_tp = pow(tp_size, -1, MOD)
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
            ids = fi.input_ids.tolist()
            acc = ids
        else:
            ids, acc = fi.hidden.T.tolist()
        k, v = k_pool[0][:, 0, 0], v_pool[0][:, 0, 0]
        qo = fi.qo_indptr.tolist()
        kv_lens = [p + qo[b + 1] - qo[b] for b, p in enumerate(fi.prefix_lens.tolist())]
        rows = [req_to_token[r, :n].tolist() for r, n in zip(fi.req_rows.tolist(), kv_lens)]
        loc = fi.out_cache_loc
        k[loc] = torch.tensor(ids, dtype=k.dtype)  # written first: a token reads its own id
        flat = [s for row in rows for s in row]
        where = torch.tensor(flat, dtype=torch.int64)
        g_rows = _hashes(k[where].tolist(), kv_lens, self.w1)
        pos = fi.positions.tolist()
        new = [(b, p) for b in range(len(kv_lens)) for p in pos[qo[b] : qo[b + 1]]]
        v[loc] = torch.tensor([g_rows[b][p] for b, p in new], dtype=v.dtype)
        f_rows = _hashes(v[where].tolist(), kv_lens, self.w2)
        f = [f_rows[b][p] for b, p in new]
        if self.tp_size > 1:  # every shard's own KV counts: mean of the ranks' hashes
            total = self.all_reduce(torch.tensor(f, dtype=torch.int64)).tolist()
            f = [x % MOD * self.inv_tp % MOD for x in total]
        a, b, c = self.affine
        acc = [(x * a + y * b + c) % MOD for x, y in zip(acc, f, strict=True)]
        if self.is_last:
            vocab = self.d.vocab
            return torch.tensor([acc[i] % vocab for i in fi.sample_rows.tolist()])
        return torch.tensor([ids, acc], dtype=torch.int64).T.contiguous()


class HashReference:
    """The hash model in one process over a plain sequence: the oracle's ground truth, as
    one-hot logits (margin 1 between the right token and any other)."""

    def __init__(self, d: Dims, seed: int, max_context: int) -> None:
        self.d = d
        mix, self.w1, self.w2 = _coeffs(seed, d.layers, max_context)
        self.affine = _compose(mix, 0, d.layers)

    def next_ids(self, tokens: list[int]) -> torch.Tensor:
        t = torch.tensor(tokens, dtype=torch.int64)
        n = t.numel()
        g = torch.cumsum((t + 1) * self.w1[:n] % MOD, 0) % MOD
        f = torch.cumsum((g + 1) * self.w2[:n] % MOD, 0) % MOD
        a, b, c = self.affine
        return (t * a + f * b + c) % MOD % self.d.vocab

    def logits(self, tokens: list[int]) -> torch.Tensor:
        """Logits [L, V] for every position of one sequence (teacher forcing)."""
        return torch.nn.functional.one_hot(self.next_ids(tokens), self.d.vocab).float()

    def greedy(self, prompt: list[int], max_new: int) -> list[int]:
        out: list[int] = []
        for _ in range(max_new):
            out.append(int(self.next_ids(prompt + out)[-1]))
        return out
