"""What the hash model would read back at each slot of its KV pool, kept in Python.

A hash stage reads its requests' whole prefixes back every forward (`hashed._decode` over a
gather of k and v): ~20 of the ~50 torch calls a forward made, each ~5 us on a tensor this
small, and the forward was a third of a simulated schedule (docs/simulation.md, issue 31).
`PoolMirror` keeps, per slot, the value that decode gives -- the id in k, the prefix hash in
v -- from the stage's own writes and from what it already read, so a read of known slots
makes no torch call.

Why it can never disagree with the pool: every write into a pool (the stage's own, a host
tier's load-back, a cutover's carry, `KVCache.reset`) is an in-place torch op, and each bumps
the tensor's version counter (shared with its views). The mirror holds the versions it last
saw and forgets every slot when the pool is another tensor or its versions moved. A slot is
known only where the decode is exact: a write whose float32 value would round (an id far out
of range) or that hit one slot twice leaves it unknown, and an unknown slot is read through
torch as before. Pools without a version counter (inference tensors) or not float32 get no
mirror: the stage reads through torch (`PoolMirror.bind` says so).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

EXACT = 1 << 24  # float32 holds every integer of magnitude <= 2^24 exactly

Values = list  # per slot: the decoded value, or None where unknown
Fetch = Callable[[list[int]], list[int]]  # the torch read and decode of some slots


class PoolMirror:
    """The decoded ids (`ids`) and prefix hashes (`hashes`) of one stage's pool, per slot."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.versions = (-1, -1)
        self.k_rows: torch.Tensor | None = None
        self.v_rows: torch.Tensor | None = None
        self.ids: Values = []
        self.hashes: Values = []

    def bind(self, k: torch.Tensor, v: torch.Tensor) -> bool:
        """Whether this forward may use the mirror of pools `k`, `v` (the layer's whole
        tensors): it forgets every slot first when they are other tensors or were written
        since `seal`."""
        if k is not self.k or v is not self.v:  # (a tensor's kind and dtype never change)
            if k.is_inference() or v.is_inference():  # no version counter to trust
                return False
            if k.dtype != torch.float32 or v.dtype != torch.float32:  # EXACT is float32's
                return False
            self.k, self.v = k, v
            # head_dim's first column of every slot (the hash model's content): views made
            # once per pool, ~5 us each per forward (a view lives as long as its pool)
            self.k_rows, self.v_rows = k[:, :, 0], v[:, :, 0]
            self.versions = (-1, -1)
        if (k._version, v._version) != self.versions:
            self.ids, self.hashes = [None] * k.shape[0], [None] * v.shape[0]
        return True

    def seal(self) -> None:
        """The pools now hold what the mirror says (call after the stage's last write)."""
        assert self.k is not None and self.v is not None
        self.versions = (self.k._version, self.v._version)

    def wrote_ids(self, slots: list[int], ids: list[int], lo: int, hi: int) -> None:
        """k at `slots` was just written with `ids` (plus each head's tag, tags in [lo, hi])."""
        self._wrote(self.ids, slots, ids, lo, hi)

    def wrote_hashes(self, slots: list[int], hashes: list[int]) -> None:
        """v at `slots` was just written with `hashes`: (hash + tag) mod MOD < 2^24, exact."""
        self._wrote(self.hashes, slots, hashes, 0, 0)

    def read_ids(self, slots: list[int], fetch: Fetch) -> list[int]:
        return self._read(self.ids, slots, fetch)

    def read_hashes(self, slots: list[int], fetch: Fetch) -> list[int]:
        return self._read(self.hashes, slots, fetch)

    @staticmethod
    def _wrote(vals: Values, slots: list[int], decoded: list[int], lo: int, hi: int) -> None:
        """Slots `slots` now decode to `decoded` where every head's value (decoded + tag, tags
        in [lo, hi]) is exact in float32."""
        n = len(vals)
        if len(set(slots)) != len(slots) or any(s < 0 or s >= n for s in slots):
            vals[:] = [None] * n  # which write a repeated slot kept, or where a -1 went: unknown
            return
        for s, x in zip(slots, decoded, strict=True):
            vals[s] = x if -EXACT <= x + lo and x + hi <= EXACT else None

    @staticmethod
    def _read(vals: Values, slots: list[int], fetch: Fetch) -> list[int]:
        """The decoded value at each of `slots`: known ones from the mirror, the others from
        `fetch` (the torch read and decode, given them in order: a slot out of the pool fails
        there as the whole read did), which the mirror then knows."""
        n = len(vals)
        if not slots:
            return []
        if min(slots) >= 0 and max(slots) < n:
            got = [vals[s] for s in slots]
            if None not in got:
                return got
        known = [0 <= s < n and vals[s] is not None for s in slots]
        fetched = iter(fetch([s for s, kn in zip(slots, known, strict=True) if not kn]))
        out = [vals[s] if kn else next(fetched) for s, kn in zip(slots, known, strict=True)]
        for s, x in zip(slots, out, strict=True):
            if 0 <= s < n:
                vals[s] = x
        return out
