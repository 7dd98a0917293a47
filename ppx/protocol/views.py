"""What a design may see of the engine: typed views of the scheduler, its KV cache, the
follower and the rank.

Designs live below the engine (ppx/protocol imports nothing from ppx/engine), but they act on
engine objects: a void re-queues through the scheduler, a retraction asks the follower to
warn. Each hook is annotated with one of these views instead of the engine class, so the type
checker (`python -m mypy ppx/protocol ppx/engine`, run by CI) proves two things at once: a
design touches nothing of the engine beyond what is listed here, and the engine objects it is
handed really have these members (structural typing checks every call site in ppx/engine).
A design that needs more adds it here, in one reviewed place.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from ppx.core import Entry, Req, SlotBatch


class HostView(Protocol):
    """The host tier of a layout: its entries and the loads under way, keyed by token path."""

    @property
    def entries(self) -> dict[tuple[int, ...], Any]: ...

    @property
    def loading(self) -> dict[tuple[int, ...], Any]: ...


class CacheView(Protocol):
    """A rank's KV cache as designs read it."""

    @property
    def host(self) -> HostView | None: ...

    @property
    def free(self) -> list[int]: ...

    @property
    def available(self) -> int: ...

    def match(self, tokens: list[int], may_load: bool = True) -> int: ...

    def tree_match(self, tokens: list[int]) -> int: ...

    def land_prefetches(self) -> None: ...


class SchedulerView(Protocol):
    """The scheduler of the current plan: its queue, slots, cells, and the moves a design may
    make (void, re-queue, park, re-point a continuation)."""

    @property
    def cache(self) -> CacheView: ...

    @property
    def waiting(self) -> deque[Req]: ...

    @property
    def reqs(self) -> dict[int, Req]: ...

    @property
    def running(self) -> list[list[Req]]: ...

    @property
    def num_slots(self) -> int: ...

    @property
    def num_inflight(self) -> int: ...

    @property
    def chunk_size(self) -> int: ...

    @property
    def max_batch(self) -> int: ...

    @property
    def chunked(self) -> Req | None: ...

    @property
    def chunked_before(self) -> list[Req | None]: ...

    def cont(self) -> Req | None: ...

    def candidates(self) -> list[Req]: ...

    def admit_entry(self, req: Req, prefix_len: int, budget: int) -> Entry | None: ...

    def void(self, batch: SlotBatch, keep: frozenset[int] | set[int] = ...) -> list[Req]: ...

    def requeue(self, req: Req) -> None: ...

    def park(self, req: Req, upto: int) -> None: ...

    def resume_chunked(self, req: Req | None, slot: int | None = None) -> None: ...

    def strays(self, but: set[int] = ...) -> list[Req]: ...

    def holds_running(self, req: Req) -> bool: ...

    def keep_running(self, req: Req) -> None: ...

    def holds_mid_prefill(self, req: Req) -> bool: ...

    def placed_ahead(self, req: Req) -> int: ...


class EventsView(Protocol):
    def emit(self, kind: str, *args: Any, **kwargs: Any) -> None: ...


class ClockView(Protocol):
    def now(self) -> float: ...


class RankView(Protocol):
    """Who this rank is, its epoch, its event log and clock, and the named stop."""

    @property
    def rank(self) -> int: ...

    @property
    def epoch(self) -> int: ...

    @property
    def events(self) -> EventsView: ...

    @property
    def t(self) -> ClockView: ...

    def stop(self, reason: str, p: Any = None) -> NoReturn: ...


class FollowerView(Protocol):
    """A follower of rank 0's decision, as a retraction design settles with it."""

    def retract(self, p: Any, entries: list[Entry], obs: list[list[int]]) -> None: ...

    def warn_each(self, p: Any, obs: list[list[int]], kind: str) -> None: ...
