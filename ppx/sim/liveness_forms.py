"""The liveness abstraction: a run's state with its monotone counters taken out.

The exhaustive search's fingerprint (fingerprint.py) holds every counter the engine keeps,
and most of them only ever grow: pass ids, each wire's sequence numbers, a request's
admission count, the radix tree's LRU clock, the board's per-wire sent / consumed
counters, the void streak. A run that voids the same pass forever therefore never repeats a
state, and a livelock is found only by the pass-count bound. The abstract digest here is the
same pickle of the same roots with those fields taken out, in two kinds:

- COUNTERS: identifiers and clocks the engine compares with each other (a message's seq
  with the receiver's `seq_in`, a batch's incarnation with the request's `admit_seq`, a
  pass id with the lap it owes, two LRU stamps) or adds to (the next pass id). Their values
  are left out of the digest and handed back, in the order the pickle met them and
  labelled with their family (`pass`, `seq`, `admit`, `stamp`, one per wire), as the
  state's counter vector: a lap of a cycle must move each by the same amount every time
  round, every pass id alike, and no two of a wire, the admissions or the stamps across
  each other (liveness.lap_shift, on every lap the pump runs), so what the engine reads of
  them -- equalities, orders, the distance of two pass ids, a pass id modulo the slots --
  is the same on every lap.
- WATCHDOG: what only the watchdogs and the telemetry read (the void streak the pass-count
  bound counts, event and pass counters, the board's heartbeat): left out, not handed back.

The board's wire counters are written as what the readiness contract reads of them, the
messages in flight per (sender, receiver, kind): sent minus consumed. Everything else is
written as the fingerprint writes it, so two states with one abstract digest and counter
vectors one lap apart differ only by that lap's shift (docs/simulation.md, Liveness).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ppx.core import Message, Req, SlotBatch
from ppx.engine.admission.decision_parts import DecisionParts
from ppx.engine.admission.follow import Follower
from ppx.engine.admission.returns import DecisionReturn
from ppx.engine.board import NUM_KINDS, Board, F
from ppx.engine.cache.radix import Node as RadixNode
from ppx.engine.cache.radix import RadixTree
from ppx.engine.channels import HEADER_LEN, Channels
from ppx.engine.conservation import Conservation
from ppx.engine.flip_schedule import FlipSchedule
from ppx.engine.loop import PassState
from ppx.engine.proxy_turns import ProxyTurns
from ppx.engine.scheduler import Tally
from ppx.engine.transport.sim import _Send
from ppx.protocol.guard.guard import Guard
from ppx.protocol.guard.unit import Rounds
from ppx.protocol.prefetch_carrier import Carrier
from ppx.protocol.reconcile import Reconcile
from ppx.protocol.void import Keep
from ppx.sim.fingerprint import Fingerprint, UnknownState, _Hashing, _Pickler
from ppx.sim.fingerprint_forms import Reader, _mark, locals_of
from ppx.telemetry.events import EventLog

# class -> {attribute: the counter family its numbers belong to}. A family's numbers move
# together: one lap moves every pass id by the same amount (liveness.py checks it), every
# number of one wire (its seq on both ends, its board counter) by the messages it carried
PASS, SEQ, ADMIT, STAMP = "pass", "seq", "admit", "stamp"
COUNTERS: dict[type, dict[str, str]] = {
    Message: {"pass_id": PASS, "seq": SEQ},
    PassState: {"pass_id": PASS},
    SlotBatch: {"pass_id": PASS, "incarnation": ADMIT},
    Req: {"admit_seq": ADMIT},
    RadixNode: {"stamp": STAMP},
    RadixTree: {"_clock": STAMP},
    Carrier: {"owe": PASS},
    ProxyTurns: {"turn": PASS},  # the last pass whose launch step the rank reached
}
# what only the watchdogs and the telemetry read: left out, not handed back
WATCHDOG: dict[type, frozenset[str]] = {
    DecisionReturn: frozenset({"void_streak", "void_slots", "laps"}),
    DecisionParts: frozenset({"n"}),
    Follower: frozenset({"n"}),
    Carrier: frozenset({"n"}),
    EventLog: frozenset({"counts"}),
    Tally: frozenset({"prefill", "cached"}),
    Rounds: frozenset({"folded"}),
    Keep: frozenset({"kept"}),
    Reconcile: frozenset({"misses", "slot_answers", "running_answers"}),
    Guard: frozenset({"n"}),  # GuardCounts: the guard's summary counters
}
# a frame's locals that hold a counter (a pass id or a seq being sent / waited for)
LOCAL_COUNTERS = {"pass_id": PASS, "seq": SEQ}
# a header's columns (channels.encode_header): kind, slot, pass_id, epoch, seq, flags, ...
HEADER_COUNTERS = ((2, PASS), (4, SEQ))
# the board's per-rank fields that hold a counter; the rest of its fields are kept
BOARD_COUNTERS = {F.PASS: PASS, F.BLK_PASS: PASS, F.BLK_SEQ: SEQ, F.HEARTBEAT_NS: "count",
                  F.WORK_PASSES: "count", F.VOIDS: "count", F.RETRACTIONS: "count",
                  F.BLK_SINCE_NS: "count", F.RING_HEAD: "count",
                  F.PREFILL_TOKENS: "count"}  # fmt: skip
BOARD_KEPT_FIELDS = [int(f) for f in F if f < F.NUM and f not in BOARD_COUNTERS]

Counter = tuple[str, int]  # (family, value)


def wire(src: int, dst: int, kind: int) -> str:
    """The family of one wire's numbers: its seq on both ends and its board counter."""
    return f"wire {src}>{dst}:{kind}"


def _ints(value, family: str, out: list[Counter]) -> object:
    """A counter field's numbers into `out`, in a fixed order (a dict's by key); what the
    digest writes in their place. A negative number is a sentinel (-1: none), kept."""
    if isinstance(value, bool | int | np.integer):
        if value < 0:
            return int(value)
        out.append((family, int(value)))
        return None
    if isinstance(value, dict):
        return [(k, _ints(value[k], family, out)) for k in sorted(value, key=repr)]
    if isinstance(value, list | tuple):
        return [_ints(v, family, out) for v in value]
    if type(value).__name__ == "count":  # itertools.count: its next value
        out.append((family, int(repr(value)[6:-1])))
        return None
    return value


_TABLES: dict[type, tuple[dict[str, str] | None, frozenset[str] | None]] = {}


def _tables(tp: type) -> tuple[dict[str, str] | None, frozenset[str] | None]:
    """A type's counter and watchdog fields, its bases' included (a subclass of a class
    with counters -- a fault's channels -- has them too)."""
    got = _TABLES.get(tp)
    if got is None:
        counters = {k: v for c in reversed(tp.__mro__) for k, v in COUNTERS.get(c, {}).items()}
        watchdog = frozenset(k for c in tp.__mro__ for k in WATCHDOG.get(c, ()))
        got = _TABLES[tp] = (counters or None, watchdog or None)
    return got


def _state(o) -> dict:
    if hasattr(o, "__dict__"):
        return dict(vars(o))
    return {s: getattr(o, s) for s in type(o).__slots__ if hasattr(o, s)}


class AbstractReader(Reader):
    """fingerprint_forms.Reader with the counters and the watchdog state taken out; the
    counters' values go to `counters`, in the order the pickle meets them."""

    def __init__(self, opaque: dict[int, int], dead: set[int], marks: dict[int, str]) -> None:
        super().__init__(opaque, dead, marks)
        self.counters: list[Counter] = []

    def __call__(self, o):
        tp = type(o)
        how = _DISPATCH.get(tp, _UNSEEN)
        if how is _UNSEEN:
            how = _DISPATCH[tp] = _dispatch_of(tp)
        if how is None or id(o) in self.opaque:
            return super().__call__(o)
        return how(self, o)

    def _fields(self, o):
        tp = type(o)
        counters, watchdog = _tables(tp)
        state = _state(o)
        for name in watchdog or ():
            state.pop(name, None)
        for name, family in sorted((counters or {}).items()):
            state[name] = _ints(state.get(name), family, self.counters)
        return _mark, ("abs", tp.__module__, tp.__qualname__), state

    def _frame(self, o):
        code = o.f_code
        local = locals_of(o)  # by name, as the fingerprint writes it
        for name, family in sorted(LOCAL_COUNTERS.items()):
            if name in local:
                local[name] = _ints(local[name], family, self.counters)
        return _mark, ("fr", code.co_filename, code.co_qualname, o.f_lasti), local

    def _send(self, o: _Send):
        if not _is_header(o.tensor):  # a payload: written as the fingerprint writes it
            return Reader.__call__(self, o)
        row = list(o.tensor) if isinstance(o.tensor, list) else o.tensor.tolist()
        for col, family in HEADER_COUNTERS:
            row[col] = _ints(row[col], family, self.counters)
        return _mark, ("hdr",), (row, o.taken)

    def _conservation(self, o: Conservation):
        # where each request is held; the pass it was last seen at is only the text of a
        # `lost` stop, and `last_commit` only the stall bound's base (a watchdog)
        seen = {rid: where for rid, (where, _) in o.seen.items()}
        return _mark, ("abs", "Conservation"), (o.rank, o.stall_passes, seen, o.fresh)

    def _board(self, o: Board):
        return _mark, ("board",), _board_state(o, self.counters)

    def _channels(self, o: Channels):
        """A rank's wire ends (FaultyChannels too): each seq in the family of its wire."""
        state = _state(o)
        me = o.rank
        for name, wire_of in (
            ("seq_out", lambda dst, kind: wire(me, dst, kind)),
            ("payload_seq", lambda dst, kind: wire(me, dst, kind)),
            ("seq_in", lambda src, kind: wire(src, me, kind)),
        ):
            d = state.pop(name)
            state[name] = [(k, _ints(d[k], wire_of(*k), self.counters)) for k in sorted(d)]
        return _mark, ("abs", "Channels"), state

    def _flips(self, o: FlipSchedule):
        """The pass of the last cutover is read against the pass id only by a flip every
        `every_passes` (a pass id then: a lap that does not flip moves it apart from the
        others, and the pump refuses the lap); otherwise nothing reads it."""
        state = _state(o)
        last = state.pop("last_cutover_pass")
        if o.enabled and o.every_passes:
            state["last_cutover_pass"] = _ints(last, PASS, self.counters)
        return _mark, ("abs", "FlipSchedule"), state


_UNSEEN: Any = object()
_DISPATCH: dict[type, Callable | None] = {}  # type -> its AbstractReader method (None: Reader's)


def _dispatch_of(tp: type) -> Callable | None:
    """Which reader a type takes in the abstract digest, found once per type."""
    if any(_tables(tp)):
        return AbstractReader._fields
    if tp is types.FrameType:
        return AbstractReader._frame
    if tp is _Send:
        return AbstractReader._send
    for base, how in (
        (Channels, AbstractReader._channels),  # FaultyChannels too
        (Conservation, AbstractReader._conservation),
        (FlipSchedule, AbstractReader._flips),
        (Board, AbstractReader._board),
    ):
        if issubclass(tp, base):
            return how
    return None


def _is_header(t) -> bool:
    if isinstance(t, list):  # the simulated wire carries a header as its list (send_header)
        return len(t) == HEADER_LEN
    return (
        isinstance(t, torch.Tensor)
        and t.dtype == torch.int64
        and t.dim() == 1
        and t.numel() == HEADER_LEN
    )


def _board_state(board: Board, counters: list[Counter]) -> tuple:
    """The board's kept fields per rank, its counter fields handed back, and the messages in
    flight per (src, dst, kind): what the readiness contract reads of the wire counters
    (sent by src, consumed by dst)."""
    world = board.arr.shape[0]
    kept = board.arr[:, BOARD_KEPT_FIELDS].tobytes()
    for r in range(world):
        for field, family in BOARD_COUNTERS.items():
            _ints(int(board.arr[r, field]), family, counters)
    sent = np.stack([board.sent(r)[:world] for r in range(world)])  # [src, dst, kind]
    consumed = np.stack([board.consumed(r)[:world] for r in range(world)])  # [dst, src, kind]
    for (src, dst, kind), n in np.ndenumerate(sent):
        _ints(int(n), wire(src, dst, kind), counters)
    return kept, (sent - consumed.transpose(1, 0, 2)).reshape(world * world, NUM_KINDS).tobytes()


class Abstraction(Fingerprint):
    """`of(sched)`: the abstract digest of the run's state and its counter vector."""

    def of(self, sched) -> tuple[bytes, tuple[Counter, ...]]:  # type: ignore[override]
        roots, dead = self.roots(sched)
        reader = AbstractReader(self.opaque, dead, {id(sched.strategy): "strategy"})
        out = _Hashing()
        try:
            _Pickler(out, reader).dump(roots)
        except (TypeError, AttributeError) as e:
            raise UnknownState(f"liveness: cannot write the state by value: {e}") from None
        return out.h.digest(), tuple(reader.counters)
