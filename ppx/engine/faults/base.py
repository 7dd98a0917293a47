"""What a fault plug-in is: a class that owns one section of the `faults` config and
implements only the hooks it needs.

A fault subclasses `Fault` and one or more hook kinds below. Every hook kind's methods are
inert here, so a fault overrides the ones it acts through and the engine calls every hook of
every active fault without asking which faults are on (rank_faults.py chains them):

- per rank: `Candidates` (the scheduler's scan of its waiting queue), `Readiness` (what a
  rank's cache reports and holds), `Carry` (what rank 0's chain carries, what an output does:
  the rank's intake), `Wire` (a rank's sends), `Cutover` (a flip's epoch count);
- per run: `RunLevel` (the KV pool sizes every rank boots with, a rank the supervisor kills).

A fault's timing, where it has one, is the transport's: a delay is its `arrival` (or `hold`),
a moment a pass count names is its `moment` (`Fault.moment`). Fixed on gloo; on the simulator
either the same or a choice the explorer's scheduler draws (faults.timing=choice,
docs/simulation.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ppx.engine.transport.base import LANDED
from ppx.fault_sections import OFF

if TYPE_CHECKING:
    from ppx.core import Message, Req
    from ppx.engine.transport.base import Arrival, Transport

RUN = -1  # the rank a run-level instance is built for (the supervisor's, not a rank's)


class Fault:
    """One fault: `key` names its section (`faults.<key>`), an instance is built per rank
    (and once with rank RUN for the run-level hooks) from that section and the whole config."""

    key: ClassVar[str]
    # the rank's transport, for a fault with a timing (RankFaults sets it); None: a unit
    # test's fault, whose moments land at once (fixed timing)
    t: Transport | None = None

    def __init__(self, section: Any, cfg: Any, rank: int) -> None:
        self.section, self.cfg, self.rank = section, cfg, rank
        self.world = int(cfg.pp)

    def moment(self, label: str) -> Arrival:
        """An effect a pass count made due: it acts once `landed()` (at once under fixed
        timing; when the simulator's scheduler picks under faults.timing=choice)."""
        return LANDED if self.t is None else self.t.moment(label)

    @classmethod
    def on(cls, section: Any) -> bool:
        """Does the section turn the fault on at all (its defaults leave it off)?"""
        raise NotImplementedError

    def here(self) -> bool:
        """Does it act on this rank (asked only when `on`)? Run-level faults act on RUN."""
        return True

    @classmethod
    def refuse(cls, section: Any, cfg: Any) -> str | None:
        """One line naming what makes the section meaningless under `cfg` (validation, before
        anything is spawned); None when it can run. Asked of every fault, on or off (a
        field that means nothing while the fault is off is refused too)."""
        return None


class OneRank(Fault):
    """A fault acting on the rank its section's `rank` names (-1: off)."""

    @classmethod
    def on(cls, section: Any) -> bool:
        return int(section.rank) != OFF

    def here(self) -> bool:
        return int(self.section.rank) == self.rank


class Candidates:
    def order(self, waiting: list[Req]) -> list[Req]:
        """The order the scheduler scans its waiting queue in (oldest first)."""
        return waiting


class Readiness:
    def match(self, n: int) -> int:
        """What the rank's radix match reports of `n` tokens it holds."""
        return n

    def offer(self, rid: int, local: int) -> int:
        """Rank 0's offer for `rid`, whose local match is `local`."""
        return local

    def voided(self, rids: set[int]) -> None:
        """Rank 0 voided a pass naming `rids`."""

    def served(self, rid: int) -> None:
        """Rank 0 served `rid`."""

    def after_pass(self, pass_id: int, cache: Any) -> None:
        """The rank finished pass `pass_id` with `cache` in force."""


class Carry:
    def after_output(self, sched: Any, done: list[tuple[Req, int]]) -> None:
        """Rank 0 committed the tokens of one output (`done`: request, token)."""

    def chain_out(self, reqs: list[Req], flags: int) -> tuple[list[Req], int, tuple[int, ...]]:
        """Rank 0's next chain: its requests, flags and header words."""
        return reqs, flags, ()

    def chain_in(self, sched: Any, msg: Message) -> None:
        """A follower read a chain."""


class Sender(Protocol):
    """What a `Wire` hook may use of the channels it wraps (faults/channels.py)."""

    t: Transport
    # the rank's current scheduler (a flip replaces it); Any: the scheduler imports this module
    sched_of: Callable[[], Any]


class Wire:
    def outgoing(self, ch: Sender, dst: int, msg: Message) -> Message | None:
        """Before the channel numbers the message: the message to send (None: never sent,
        never counted)."""
        return msg

    def posting(self, ch: Sender, dst: int, msg: Message) -> bool:
        """Numbered, about to be posted: False keeps it off the wire (counted, lost). May
        hold the sender (a slow link)."""
        return True


class Cutover:
    def extra_epochs(self, flips: int) -> int:
        """Epochs this rank counts beyond the one a cutover advances (`flips` done before)."""
        return 0


class RunLevel:
    def pool_sizes(self, sizes: list[int]) -> list[int]:
        """Every rank's KV pool size, in tokens."""
        return sizes

    def kill(self, world: int) -> tuple[int, float] | None:
        """(rank, seconds after boot) the supervisor of `world` ranks SIGKILLs; None: no one."""
        return None
