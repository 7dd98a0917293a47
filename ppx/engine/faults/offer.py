"""faults.offer_flap: rank 0's radix match for a request loses `flap` tokens after each void of
it and regains them after the next (its unshared extension dropped and recomputed), so a
refused rid's offers alternate: boot 7's told 7939 / 0 (sgl-project#987). Injected: the log's
alternation came from #987 Part B (rank 0 alone holding a sampled token), which ppx does not
produce in this configuration.
"""

from __future__ import annotations


class NoOfferFault:
    def read(self, rid: int, local: int) -> int:
        return local

    def voided(self, rids: set[int]) -> None:
        pass

    def served(self, rid: int) -> None:
        pass


class OfferFlap(NoOfferFault):
    def __init__(self, flap: int) -> None:
        self.flap = flap
        self.flapped: set[int] = set()  # rids whose match is read `flap` tokens short now

    def read(self, rid: int, local: int) -> int:
        return local - self.flap if rid in self.flapped and local > self.flap else local

    def voided(self, rids: set[int]) -> None:
        self.flapped ^= rids  # each void toggles the match, once per rid

    def served(self, rid: int) -> None:
        self.flapped.discard(rid)


def offer_fault(cfg, rank: int) -> NoOfferFault:
    """Only rank 0's offer flaps (validation refuses it elsewhere)."""
    flap = int(cfg.faults.offer_flap)
    return OfferFlap(flap) if flap > 0 and rank == 0 else NoOfferFault()
