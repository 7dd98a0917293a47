"""`engine.guard.name`: the congruence guard's learned floors that clamp rank 0's next `told`.

`rid` keeps a floor per request from the coverage a retraction reported (sgl-project#630);
`prefix` keys the floor by a stable hash of the offered prefix tokens and its length, so every
new request over the same prefix is clamped too (sgl-project#963). Floors only ever go down: a
retraction happens only when local < told <= floor, and the new floor is that local, so each
retraction strictly lowers the floor and the retry loop ends (at worst at told = 0, which
every rank can honour). The log measured it on three ranks: 120 -> 64 -> 50 -> served.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ppx.protocol.axis import Axis, Counter, Param, Variant
from ppx.protocol.policy import policy_of

AXIS = Axis(
    "engine.guard.name",
    "guard",
    "what rank 0 learns from a retraction to clamp its next told",
    default="off",
    counters=(
        Counter("guard_floors_learned"),
        Counter("guard_clamps"),
        Counter("unresolved"),
        Counter("escalations"),
        Counter("prefix_floors_cleared"),
        # retraction rows that said POOL_SHORT (capacity): rank 0 admits against the smallest
        # pool, so under a decision any is a failure (DecisionPolicy.check_capacity)
        Counter("pool_short"),
    ),
    params=(Param("engine.guard.defer_cap", "defer_cap"),),
)


def prefix_key(tokens: list[int], length: int) -> str:
    """blake2b over the prefix tokens and its length; never Python's hash() (salted per
    process, so two ranks would disagree)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(length.to_bytes(4, "little"))
    for t in tokens[:length]:
        h.update(int(t).to_bytes(4, "little"))
    return h.hexdigest()


class Floors(Variant):
    axis = AXIS
    active = True  # off: the guard clamps nothing and learns nothing (it still counts)

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.rid_floor: dict[int, int] = {}
        # rid -> rank 0's own match when it last made the rid an offer: the prefix the offer
        # was made OVER (the log's `prefix_key` passed to prefix_len_for), whatever told it
        # was clamped to
        self.offered_over: dict[int, int] = {}
        self.learned = self.cleared = 0

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        p = policy_of(cfg)
        if cls is not Off and p.never_voids:
            return (
                f"engine/guard={cls.name} learns from retractions, which "
                f"engine/admission={p.name} never makes (sgl-project#1071)"
            )
        return None

    def floor(self, rid: int, tokens: list[int], local: int) -> int | None:
        """The lowest floor that applies to this offer, or None."""
        return self.rid_floor.get(rid)

    def learn(self, rid: int, tokens: list[int], told: int, local: int) -> None:
        self.learned += 1
        self.rid_floor[rid] = min(local, self.rid_floor.get(rid, told))

    def served(self, rid: int) -> None:
        self.rid_floor.pop(rid, None)
        self.offered_over.pop(rid, None)

    def prefix_served(self, tokens: list[int]) -> None:
        """The group computed `tokens` (a prefill that was not voided)."""


class Off(Floors):
    name = "off"
    ref = "before sgl-project#630"
    about = "no floor: a retraction loop can livelock (the livelock bound names it)"
    active = False


class RidFloor(Floors):
    name = "rid"
    ref = "sgl-project#630"
    about = "a floor per request from the coverage its retraction reported"


class PrefixFloor(Floors):
    name = "prefix"
    ref = "sgl-project#963"
    about = "a floor keyed by the offered prefix: every new rid over it is clamped too"

    SLOTS = 4096  # the table is bounded (the log's PREFIX_FLOOR_SLOTS): oldest key dropped

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.prefix_floor: dict[str, int] = {}
        self.prefix_len: dict[str, int] = {}  # key -> the prefix length it was learned at

    def floor(self, rid: int, tokens: list[int], local: int) -> int | None:
        floors = [self.rid_floor[rid]] if rid in self.rid_floor else []
        if local > 0:
            self.offered_over[rid] = local
            key = prefix_key(tokens, local)
            if key in self.prefix_floor:
                floors.append(self.prefix_floor[key])
        return min(floors) if floors else None

    def learn(self, rid: int, tokens: list[int], told: int, local: int) -> None:
        super().learn(rid, tokens, told, local)
        # keyed by the prefix the offer was made over (rank 0's match), not by the told it
        # was clamped to: a lookup is by rank 0's match, so a floor keyed at a clamped told
        # (120 -> clamped 64, refused at 50) would never be found again and the population
        # would be offered the looser 64 (#963 "the prefix floor only ever tightens")
        n = max(self.offered_over.get(rid, told), told)
        key = prefix_key(tokens, n)
        self.prefix_floor[key] = min(local, self.prefix_floor.get(key, told))
        self.prefix_len[key] = n
        while len(self.prefix_floor) > self.SLOTS:
            old = next(iter(self.prefix_floor))
            del self.prefix_floor[old], self.prefix_len[old]

    def prefix_served(self, tokens: list[int]) -> None:
        """Every floor over a prefix of `tokens` describes a shortfall that no longer exists
        (#963 clear-on-serve; engine.guard.prefix_clear decides whether this is called)."""
        for key, n in list(self.prefix_len.items()):
            if n <= len(tokens) and prefix_key(tokens, n) == key:
                del self.prefix_floor[key], self.prefix_len[key]
                self.cleared += 1
