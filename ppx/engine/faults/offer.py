"""faults.offer_flap (hook `Readiness`): rank 0's radix match for a request loses `tokens`
after each void of it and regains them after the next (its unshared extension dropped and
recomputed), so a refused rid's offers alternate: boot 7's told 7939 / 0 (sgl-project#987).
Injected: the log's alternation came from #987 Part B (rank 0 alone holding a sampled
token), which ppx does not produce in this configuration.
"""

from __future__ import annotations

from typing import Any

from ppx.engine.faults.base import Fault, Readiness
from ppx.protocol.policy import policy_of


class OfferFlap(Fault, Readiness):
    key = "offer_flap"

    def __init__(self, section: Any, cfg: Any, rank: int) -> None:
        super().__init__(section, cfg, rank)
        self.flap = int(section.tokens)
        self.flapped: set[int] = set()  # rids whose match is read `flap` tokens short now

    @classmethod
    def on(cls, section: Any) -> bool:
        return int(section.tokens) != 0

    def here(self) -> bool:
        return self.rank == 0  # only rank 0's offer flaps

    @classmethod
    def refuse(cls, section: Any, cfg: Any) -> str | None:
        flap, policy = int(section.tokens), policy_of(cfg)
        if flap < 0 or flap > 0 and (not policy.decides or policy.never_voids):  # toggled at a void
            return (
                f"faults.offer_flap.tokens={flap}: a token count >= 0, and only rank 0's offer "
                f"flaps (engine/admission=decision or forwarded, not "
                f"{cfg.engine.admission.name})"
            )
        return None

    def offer(self, rid: int, local: int) -> int:
        return local - self.flap if rid in self.flapped and local > self.flap else local

    def voided(self, rids: set[int]) -> None:
        self.flapped ^= rids  # each void toggles the match, once per rid

    def served(self, rid: int) -> None:
        self.flapped.discard(rid)
