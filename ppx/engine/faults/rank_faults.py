"""The hooks of the active faults, chained per kind: what the engine holds and calls. A kind
no active fault implements is its inert base (base.py), so the engine never asks which
faults are on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from ppx.core import Message, Req
from ppx.engine.faults.base import RUN, Candidates, Carry, Cutover, Readiness, RunLevel, Wire
from ppx.engine.faults.registry import active

if TYPE_CHECKING:
    from ppx.engine.transport.base import Transport

K = TypeVar("K")


def _of(faults: list, kind: type[K]) -> list[K]:
    return [f for f in faults if isinstance(f, kind)]


class _Candidates(Candidates):
    def __init__(self, hooks: list[Candidates]) -> None:
        self.hooks = hooks

    def order(self, waiting: list[Req]) -> list[Req]:
        for h in self.hooks:
            waiting = h.order(waiting)
        return waiting


class _Readiness(Readiness):
    def __init__(self, hooks: list[Readiness]) -> None:
        self.hooks = hooks

    def match(self, n: int) -> int:
        for h in self.hooks:
            n = h.match(n)
        return n

    def offer(self, rid: int, local: int) -> int:
        for h in self.hooks:
            local = h.offer(rid, local)
        return local

    def voided(self, rids: set[int]) -> None:
        for h in self.hooks:
            h.voided(rids)

    def served(self, rid: int) -> None:
        for h in self.hooks:
            h.served(rid)

    def after_pass(self, pass_id: int, cache: Any) -> None:
        for h in self.hooks:
            h.after_pass(pass_id, cache)


class _Carry(Carry):
    def __init__(self, hooks: list[Carry]) -> None:
        self.hooks = hooks

    def after_output(self, sched: Any, done: list[tuple[Req, int]]) -> None:
        for h in self.hooks:
            h.after_output(sched, done)

    def chain_out(self, reqs: list[Req], flags: int) -> tuple[list[Req], int, tuple[int, ...]]:
        words: tuple[int, ...] = ()
        for h in self.hooks:
            reqs, flags, more = h.chain_out(reqs, flags)
            words += more
        return reqs, flags, words

    def chain_in(self, sched: Any, msg: Message) -> None:
        for h in self.hooks:
            h.chain_in(sched, msg)


class _Cutover(Cutover):
    def __init__(self, hooks: list[Cutover]) -> None:
        self.hooks = hooks

    def extra_epochs(self, flips: int) -> int:
        return sum(h.extra_epochs(flips) for h in self.hooks)


def _chain(hooks: list, base: type, chained: type) -> Any:
    """None active: the inert base; one: itself (no indirection on a hot path); more: both."""
    if not hooks:
        return base()
    return hooks[0] if len(hooks) == 1 else chained(hooks)


class RankFaults:
    """One rank's active faults, by hook kind."""

    def __init__(self, cfg: Any, rank: int, t: Transport | None = None) -> None:
        faults = active(cfg, rank, t)  # t: the rank's transport, for the faults' timing
        self.candidates: Candidates = _chain(_of(faults, Candidates), Candidates, _Candidates)
        self.readiness: Readiness = _chain(_of(faults, Readiness), Readiness, _Readiness)
        self.carry: Carry = _chain(_of(faults, Carry), Carry, _Carry)
        self.cutover: Cutover = _chain(_of(faults, Cutover), Cutover, _Cutover)
        self.wire: list[Wire] = _of(faults, Wire)


class RunFaults:
    """The run-level hooks of the active faults (the supervisors and the plan ask them)."""

    def __init__(self, cfg: Any) -> None:
        self.hooks = _of(active(cfg, RUN), RunLevel)

    def pool_sizes(self, sizes: list[int]) -> list[int]:
        for h in self.hooks:
            sizes = h.pool_sizes(sizes)
        return sizes

    def kill(self, world: int) -> tuple[int, float] | None:
        """The first kill any fault asks for (one kill per run is what the supervisors do)."""
        kills = [k for h in self.hooks if (k := h.kill(world)) is not None]
        return kills[0] if kills else None
