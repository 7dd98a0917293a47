"""A proxy is pulled in its own pass or never: when a proxy receive and its send can no
longer meet, say so by name instead of waiting for good.

Each rank sends its pass's proxy in that pass (it formed a batch for the slot) or not at all,
and its headers reach the next rank in the order it posted them. So a rank that waits for
the proxy of pass p and reads its upstream's chain of a later pass knows the proxy was never
sent (`NeverSent`: the upstream ran the pass with no batch for the slot), and a rank that
reads a proxy of a pass whose launch step it has run knows it will never pull it
(`NeverPulled`: it had no batch for the slot, the upstream's flush waits on it). Both are
rank-local admission diverging (engine/admission=rank_local: a host-tier load landing at
different passes on different ranks), read as the proxy width check reads a proxy whose rows
differ: one side's batch has zero rows. A design whose ranks agree never meets either.
"""

from __future__ import annotations

from collections.abc import Iterable

from ppx.core import Flag, Kind, Message, StopRun


class NeverSent(StopRun):
    """The upstream left the pass this rank waits on without sending its proxy."""

    def __init__(self, src: int, pass_id: int, later: Message) -> None:
        self.src, self.pass_id, self.later = src, pass_id, later.pass_id
        super().__init__(
            f"rank{src} sent its {later.kind.label} of pass {later.pass_id} and no proxy of "
            f"pass {pass_id}"
        )

    def width_check(self, rank: int, slot: int, tokens: int, rids: list[int]) -> str:
        """The stop's reason, as the proxy width check words a proxy whose rows differ."""
        return (
            f"proxy width check: rank{rank} slot={slot} pass={self.pass_id} rows=0 vs "
            f"tokens={tokens}; upstream batch [] vs local {rids} ({self}: it formed no batch "
            "for the slot)"
        )


class NeverPulled(StopRun):
    """A proxy of a pass this rank ran with no batch for the slot came in."""

    def __init__(self, rank: int, src: int, msg: Message, rows: int) -> None:
        what = "a void" if msg.flags & Flag.VOID else f"rows={rows}"
        super().__init__(
            f"proxy width check: rank{rank} slot={msg.slot} pass={msg.pass_id} {what} vs "
            f"tokens=0; rank{src} sent a proxy of pass {msg.pass_id} and rank{rank} ran that "
            "pass with no batch for the slot"
        )


class ProxyTurns:
    """One rank's receiving end: the last pass whose launch step it reached."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.turn = -1  # proxies of this pass and earlier are pulled already or never

    def proxy_in(self, src: int, pass_id: int, msg: Message, rows: int) -> None:
        """The proxy a receive for `pass_id` got: of an earlier pass, it belongs to a pass this
        rank ran without it; of a later one, the upstream skipped `pass_id`."""
        if msg.pass_id < pass_id:
            raise NeverPulled(self.rank, src, msg, rows)
        if msg.pass_id > pass_id:
            raise NeverSent(src, pass_id, msg)

    def stashed(self, src: int, msg: Message, rows: int, waiting: int | None) -> None:
        """A header a receive set aside; `waiting`: the pass of the proxy it waits for."""
        if msg.kind == Kind.PROXY and msg.pass_id <= self.turn:
            raise NeverPulled(self.rank, src, msg, rows)
        if waiting is not None and msg.kind == Kind.CHAIN and msg.pass_id > waiting:
            raise NeverSent(src, waiting, msg)

    def stashed_all(self, src: int, held: Iterable[tuple[Message, int]], waiting: int | None):
        for msg, rows in held:
            self.stashed(src, msg, rows, waiting)
