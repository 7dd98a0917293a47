"""Congruence guard: learned floors that clamp rank 0's next `told`.

`rid` keeps a floor per request from the coverage a retraction reported; `prefix` keys the
floor by a stable hash of the offered prefix tokens and its length, so every new request over
the same prefix is clamped too (sgl-project#963). Floors only ever go down: a retraction
happens only when local < told <= floor, and the new floor is that local, so each retraction
strictly lowers the floor and the retry loop ends (at worst at told = 0, which every rank can
honour).

Switches, each a design the reference log adopted and later changed:
- `prefix_clear`: `serve` (default) clears a prefix floor the moment the group serves that
  prefix; `never` keeps it for good, the "clear-on-serve withdrawn" mutant #963 rejected
  (a healed prefix loses its reuse for the rest of the run).
- `miss`: `sentinel` (default) reports a lookup the follower could not resolve as -1 and the
  per-rid defer cap escalates to told=0 (sgl-project#944); `zero` reads it as local = 0, a
  measurement nobody made, from which floors are learned.
- `defer_cap <= 0` disables the bound (so it can be neutered on its own, as in the log).
- `defer_streak`: `refusal` (default, sgl-project#987 Part A) keys the unresolved streak on the
  rid's refusals: it survives a change of offer, the escalation holds until the rid is served,
  and a refused told<=0 counts like any other. `offer` is the #944 era: the streak is keyed on
  rank 0's offer (`note_offer`): a different `told` for the rid restarts it, and a told<=0
  offer is honourable by definition, so its refusal is never counted. The cap's own pin
  (told=0) is such a change, so under `offer` an escalation lasts one offer; if that told=0 is
  refused, the next offer is the measured one again and the streak starts over: boot 7's
  alternation (told 7939 / 0, 1 termination in 506 laps).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

UNRESOLVED = -1  # the follower could not measure its coverage (e.g. a prefetch pending)
POOL_SHORT = -2  # the follower holds the prefix but its pool cannot hold the rest: no floor
# follower_seats=veto: the follower's own seat count said full (not coverage, not the
# allocator): no floor either
SEATS_SHORT = -3


def prefix_key(tokens: list[int], length: int) -> str:
    """blake2b over the prefix tokens and its length; never Python's hash() (salted per
    process, so two ranks would disagree)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(length.to_bytes(4, "little"))
    for t in tokens[:length]:
        h.update(int(t).to_bytes(4, "little"))
    return h.hexdigest()


class Guard:
    def __init__(
        self,
        mode: str,
        defer_cap: int,
        miss: str = "sentinel",
        prefix_clear: str = "serve",
        defer_streak: str = "refusal",
        on_escalate: Callable[[int, int], None] | None = None,
    ) -> None:
        self.mode, self.defer_cap = mode, defer_cap
        self.miss, self.prefix_clear = miss, prefix_clear
        self.offer_keyed = defer_streak == "offer"
        self.last_offer: dict[int, int] = {}  # rid -> rank 0's previous told (offer keying)
        self.on_escalate = on_escalate  # (rid, unresolved reports) -> the named event
        self.rid_floor: dict[int, int] = {}
        self.prefix_floor: dict[str, int] = {}
        self.prefix_len: dict[str, int] = {}  # key -> the prefix length it was learned at
        self.defers: dict[int, int] = {}  # rid -> unresolved reports so far
        self.hold: set[int] = set()
        self.escalated: set[int] = set()
        self.floors_learned = self.clamps = self.unresolved = self.pool_short = 0
        self.seats_short = 0
        self.escalations = self.prefix_cleared = 0
        self.streak_resets = self.exempt = 0

    def read_miss(self, local: int) -> int:
        """What a follower reports for a lookup it could not resolve."""
        return 0 if local == UNRESOLVED and self.miss == "zero" else local

    def clamp(self, rid: int, tokens: list[int], local: int) -> int | None:
        """The `told` rank 0 offers for `rid`; None = defer this request for now."""
        if self.mode == "off":
            return local
        if rid in self.escalated:
            self.clamps += 1
            if self.offer_keyed:
                # the offer-keyed streak restarts at the pin itself: it lasts one offer
                self.escalated.discard(rid)
            return self.note_offer(rid, 0)  # escalated: recompute everything, which every rank can
        if rid in self.hold:  # an unresolved report: give the follower one round to settle
            self.hold.discard(rid)
            return None
        floors = [self.rid_floor[rid]] if rid in self.rid_floor else []
        if self.mode == "prefix" and local > 0:
            key = prefix_key(tokens, local)
            if key in self.prefix_floor:
                floors.append(self.prefix_floor[key])
        floor = min(floors) if floors else None
        if floor is not None and floor < local:
            self.clamps += 1
            return self.note_offer(rid, floor)
        return self.note_offer(rid, local)

    def note_offer(self, rid: int, told: int) -> int:
        """Rank 0 offers `told` for `rid`. Under `defer_streak=offer` an offer different from
        the last one restarts the rid's unresolved streak (#944's note_offer)."""
        if self.offer_keyed:
            last = self.last_offer.get(rid)
            if last is not None and last != told and self.defers.pop(rid, 0):
                self.streak_resets += 1
            self.last_offer[rid] = told
        return told

    def learn(self, rid: int, tokens: list[int], told: int, local: int) -> None:
        if local == POOL_SHORT:
            self.pool_short += 1  # capacity, not coverage: a floor here would cost reuse
            return
        if local == SEATS_SHORT:
            self.seats_short += 1  # a rank-local count, not coverage: no floor either
            return
        if local == UNRESOLVED:
            self.unresolved += 1  # counted with the guard off too: it is what the rank said
        if self.mode == "off":
            return
        if local == UNRESOLVED:
            if self.offer_keyed and told <= 0:
                self.exempt += 1  # #944: told<=0 is honourable unconditionally, never counted
                self.hold.add(rid)
                return
            self.defers[rid] = self.defers.get(rid, 0) + 1
            if 0 < self.defer_cap < self.defers[rid] and rid not in self.escalated:
                self.escalated.add(rid)
                self.escalations += 1
                if self.on_escalate is not None:
                    self.on_escalate(rid, self.defers[rid])
            else:
                self.hold.add(rid)
            return
        self.floors_learned += 1
        self.rid_floor[rid] = min(local, self.rid_floor.get(rid, told))
        if self.mode == "prefix":
            key = prefix_key(tokens, told)
            self.prefix_floor[key] = min(local, self.prefix_floor.get(key, told))
            self.prefix_len[key] = told

    def served(self, rid: int) -> None:
        """A clean return clears the request's floor and its defer count."""
        self.rid_floor.pop(rid, None)
        self.defers.pop(rid, None)
        self.hold.discard(rid)
        self.escalated.discard(rid)
        self.last_offer.pop(rid, None)

    def prefix_served(self, tokens: list[int]) -> None:
        """The group computed `tokens` (a prefill that was not voided): every floor over a
        prefix of them describes a shortfall that no longer exists (#963 clear-on-serve)."""
        if self.prefix_clear != "serve" or not self.prefix_floor:
            return
        for key, n in list(self.prefix_len.items()):
            if n <= len(tokens) and prefix_key(tokens, n) == key:
                del self.prefix_floor[key], self.prefix_len[key]
                self.prefix_cleared += 1

    def counters(self) -> dict:
        return {
            "guard_floors_learned": self.floors_learned,
            "guard_clamps": self.clamps,
            "unresolved": self.unresolved,
            "escalations": self.escalations,
            "prefix_floors_cleared": self.prefix_cleared,
            "defer_streak_resets": self.streak_resets,
            "unresolved_exempt": self.exempt,
        }
