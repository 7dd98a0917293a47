"""The congruence guard on rank 0, composed of the guard designs the config chose.

`Floors` (engine.guard.name) says which floor applies to an offer and learns one from a
retraction; `Miss` (engine.guard.miss) says how a follower reported a lookup it could not
resolve; `DeferStreak` (engine.guard.defer_streak) keys the unresolved streak; `GuardUnit`
(engine.guard.unit) says which of a void's rows count (a round, or every rank's report); the
defer cap (`engine.guard.defer_cap`, <= 0 disables it) escalates a rid that kept coming back
unresolved to `told=0`, which every rank can honour.
"""

from __future__ import annotations

from collections.abc import Callable

from ppx.core import POOL_SHORT, SEATS_SHORT, UNRESOLVED
from ppx.protocol.guard.defer_streak import DeferStreak
from ppx.protocol.guard.floors import Floors
from ppx.protocol.guard.prefix_clear import PrefixClear
from ppx.protocol.guard.unit import GuardUnit


class Guard:
    def __init__(
        self,
        floors: Floors,
        streak: DeferStreak,
        clear: PrefixClear,
        defer_cap: int,
        on_escalate: Callable[[int, int], None] | None = None,
        unit: GuardUnit | None = None,
    ) -> None:
        self.floors, self.streak, self.clear = floors, streak, clear
        self.unit = unit  # None: every row counts (a bare guard in a unit test)
        self.defer_cap = defer_cap
        self.on_escalate = on_escalate  # (rid, unresolved rounds) -> the named event, once per rid
        self.announced: set[int] = set()  # rids whose escalation was named (until served)
        self.last_offer: dict[int, int] = {}  # rid -> rank 0's previous told (offer keying)
        self.defers: dict[int, int] = {}  # rid -> unresolved reports so far
        self.hold: set[int] = set()
        self.escalated: set[int] = set()
        self.clamps = self.unresolved = self.pool_short = self.seats_short = 0
        self.escalations = self.streak_resets = self.exempt = 0

    def clamp(self, rid: int, tokens: list[int], local: int) -> int | None:
        """The `told` rank 0 offers for `rid`; None = defer this request for now."""
        if not self.floors.active:
            return local
        if rid in self.escalated:
            self.clamps += 1
            if self.streak.offer_keyed:
                # the offer-keyed streak restarts at the pin itself: it lasts one offer
                self.escalated.discard(rid)
            return self.note_offer(rid, 0)  # escalated: recompute everything, which every rank can
        if rid in self.hold:  # an unresolved report: give the follower one round to settle
            self.hold.discard(rid)
            return None
        floor = self.floors.floor(rid, tokens, local)
        if floor is not None and floor < local:
            self.clamps += 1
            return self.note_offer(rid, floor)
        return self.note_offer(rid, local)

    def note_offer(self, rid: int, told: int) -> int:
        """Rank 0 offers `told` for `rid`. Keyed on the offer, a different told from the last
        one restarts the rid's unresolved streak (#944's note_offer)."""
        if self.streak.offer_keyed:
            last = self.last_offer.get(rid)
            if last is not None and last != told and self.defers.pop(rid, 0):
                self.streak_resets += 1
            self.last_offer[rid] = told
        return told

    def learn_void(self, obs: list[list[int]], tokens_of: Callable[[int], list[int]]) -> None:
        """A voided pass came back with `obs` rows [rank, rid, told, local]; the unit design
        says which of them this void teaches (engine.guard.unit)."""
        rows = self.unit.rows(obs) if self.unit is not None else obs
        for _rank, rid, told, local in rows:
            self.learn(rid, tokens_of(rid), told, local)

    def learn(self, rid: int, tokens: list[int], told: int, local: int) -> None:
        if local == POOL_SHORT:
            self.pool_short += 1  # capacity, not coverage: a floor here would cost reuse
            return
        if local == SEATS_SHORT:
            self.seats_short += 1  # a rank-local count, not coverage: no floor either
            return
        if local == UNRESOLVED:
            self.unresolved += 1  # counted with the guard off too: it is what the rank said
        if not self.floors.active:
            return
        if local == UNRESOLVED:
            self.defer(rid, told)
            return
        self.floors.learn(rid, tokens, told, local)

    def defer(self, rid: int, told: int) -> None:
        if self.streak.offer_keyed and told <= 0:
            self.exempt += 1  # #944: told<=0 is honourable unconditionally, never counted
            self.hold.add(rid)
            return
        self.defers[rid] = self.defers.get(rid, 0) + 1
        # at the cap, not past it: cap 3 defers three offers and pins the fourth to told=0
        # (#944 `test_at_the_cap_the_offer_is_pinned_to_zero`: offers [4096] * 3, then 0)
        if 0 < self.defer_cap <= self.defers[rid] and rid not in self.escalated:
            self.escalated.add(rid)
            self.escalations += 1
            # ONE loud refusal per rid (#944): an offer-keyed streak can escalate the same rid
            # again after its pin, and naming it at every offer would bury the line
            if self.on_escalate is not None and rid not in self.announced:
                self.announced.add(rid)
                self.on_escalate(rid, self.defers[rid])
        else:
            self.hold.add(rid)

    def served(self, rid: int) -> None:
        """A clean return clears the request's floor and its defer count."""
        self.floors.served(rid)
        self.defers.pop(rid, None)
        self.hold.discard(rid)
        self.escalated.discard(rid)
        self.announced.discard(rid)
        self.last_offer.pop(rid, None)

    def prefix_served(self, tokens: list[int]) -> None:
        """The group computed `tokens`: a floor over them is stale unless the design keeps it."""
        if self.clear.clears:
            self.floors.prefix_served(tokens)

    def counters(self) -> dict[str, int]:
        return {
            "guard_floors_learned": self.floors.learned,
            "guard_clamps": self.clamps,
            "unresolved": self.unresolved,
            "escalations": self.escalations,
            "prefix_floors_cleared": self.floors.cleared,
            "defer_streak_resets": self.streak_resets,
            "unresolved_exempt": self.exempt,
            "pool_short": self.pool_short,
        }
