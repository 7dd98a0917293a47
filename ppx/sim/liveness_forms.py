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
  are left out of the digest and handed back, in the order the pickle met them, as the
  state's counter vector: a lap of a cycle must move every one of them by the same amount
  every time round (liveness.py checks it on three laps), so every difference and order
  between two of them -- all the engine reads of them -- is the same on every lap.
- WATCHDOG: what only the watchdogs and the telemetry read (the void streak the pass-count
  bound counts, event and pass counters, the board's heartbeat): left out, not handed back.

The board's wire counters are written as what the readiness contract reads of them, the
messages in flight per (sender, receiver, kind): sent minus consumed. Everything else is
written as the fingerprint writes it, so two states with one abstract digest and counter
vectors one lap apart differ only by that lap's shift (docs/simulation.md, Liveness).
"""

from __future__ import annotations

import types

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
from ppx.engine.loop import PassState
from ppx.engine.scheduler import Tally
from ppx.engine.transport.sim import _Send
from ppx.protocol.guard.unit import Rounds
from ppx.sim.fingerprint import Fingerprint, UnknownState, _Hashing, _Pickler
from ppx.sim.fingerprint_forms import Reader, _mark
from ppx.telemetry.events import EventLog

# class -> attributes that are counters (compared / added, handed back) or watchdog state
COUNTERS: dict[type, frozenset[str]] = {
    Message: frozenset({"pass_id", "seq"}),
    PassState: frozenset({"pass_id"}),
    SlotBatch: frozenset({"pass_id", "incarnation"}),
    Channels: frozenset({"seq_out", "seq_in", "payload_seq"}),
    Req: frozenset({"admit_seq"}),
    RadixNode: frozenset({"stamp"}),
    RadixTree: frozenset({"_clock"}),
    Conservation: frozenset({"seen", "last_commit"}),
}
WATCHDOG: dict[type, frozenset[str]] = {
    DecisionReturn: frozenset({"void_streak", "void_slots", "laps"}),
    DecisionParts: frozenset({"n"}),
    Follower: frozenset({"n"}),
    EventLog: frozenset({"counts"}),
    Tally: frozenset({"prefill", "cached"}),
    Rounds: frozenset({"folded"}),
}
# a frame's locals that hold a counter (a pass id or a seq being sent / waited for)
LOCAL_COUNTERS = frozenset({"pass_id", "seq"})
# a header's columns (channels.encode_header): kind, slot, pass_id, epoch, seq, flags, ...
HEADER_COUNTER_COLUMNS = (2, 4)
# the board's per-rank fields that count or stamp (pass ids, passes, voids, clocks)
BOARD_COUNTER_FIELDS = (
    F.HEARTBEAT_NS, F.PASS, F.WORK_PASSES, F.VOIDS, F.RETRACTIONS, F.BLK_PASS, F.BLK_SEQ,
    F.BLK_SINCE_NS, F.RING_HEAD, F.PREFILL_TOKENS,
)  # fmt: skip
BOARD_KEPT_FIELDS = [int(f) for f in F if f < F.NUM and f not in BOARD_COUNTER_FIELDS]


def _ints(value, out: list[int]) -> None:
    """A counter field's numbers, in a fixed order (dict items sorted by key)."""
    if isinstance(value, bool | int | np.integer):
        out.append(int(value))
    elif isinstance(value, dict):
        for k in sorted(value, key=repr):
            _ints(value[k], out)
    elif isinstance(value, list | tuple):
        for v in value:
            _ints(v, out)
    elif type(value).__name__ == "count":  # itertools.count: its next value
        out.append(int(repr(value)[6:-1]))


def _state(o) -> dict:
    if hasattr(o, "__dict__"):
        return dict(vars(o))
    return {s: getattr(o, s) for s in type(o).__slots__ if hasattr(o, s)}


class AbstractReader(Reader):
    """fingerprint_forms.Reader with the counters and the watchdog state taken out; the
    counters' values go to `counters`, in the order the pickle meets them."""

    def __init__(self, opaque: set[int], dead: set[int], marks: dict[int, str]) -> None:
        super().__init__(opaque, dead, marks)
        self.counters: list[int] = []

    def __call__(self, o):
        tp = type(o)
        counters, watchdog = COUNTERS.get(tp), WATCHDOG.get(tp)
        if counters is not None or watchdog is not None:
            if id(o) in self.opaque:
                return super().__call__(o)
            state = _state(o)
            for name in sorted(counters or ()):
                _ints(state.pop(name, None), self.counters)
            for name in watchdog or ():
                state.pop(name, None)
            return _mark, ("abs", tp.__module__, tp.__qualname__), state
        if tp is types.FrameType:
            code = o.f_code
            local = dict(o.f_locals)
            for name in sorted(LOCAL_COUNTERS & local.keys()):
                _ints(local.pop(name), self.counters)
            return _mark, ("fr", code.co_filename, code.co_qualname, o.f_lasti), local
        if tp is _Send and _is_header(o.tensor):
            row = o.tensor.tolist()
            for col in HEADER_COUNTER_COLUMNS:
                self.counters.append(row[col])
                row[col] = None
            return _mark, ("hdr",), (row, o.taken)
        if isinstance(o, Board):
            return _mark, ("board",), _board_state(o, self.counters)
        return super().__call__(o)


def _is_header(t) -> bool:
    return (
        isinstance(t, torch.Tensor)
        and t.dtype == torch.int64
        and t.dim() == 1
        and t.numel() == HEADER_LEN
    )


def _board_state(board: Board, counters: list[int]) -> tuple:
    """The board's kept fields per rank, and the messages in flight per (src, dst, kind):
    what the readiness contract reads of the wire counters (sent by src, consumed by dst)."""
    world = board.arr.shape[0]
    kept = board.arr[:, BOARD_KEPT_FIELDS].tobytes()
    counters.extend(int(v) for v in board.arr[:, list(BOARD_COUNTER_FIELDS)].ravel())
    sent = np.stack([board.sent(r)[:world] for r in range(world)])  # [src, dst, kind]
    consumed = np.stack([board.consumed(r)[:world] for r in range(world)])  # [dst, src, kind]
    counters.extend(int(v) for v in sent.ravel())
    return kept, (sent - consumed.transpose(1, 0, 2)).reshape(world * world, NUM_KINDS).tobytes()


class Abstraction(Fingerprint):
    """`of(sched)`: the abstract digest of the run's state and its counter vector."""

    def of(self, sched) -> tuple[bytes, tuple[int, ...]]:  # type: ignore[override]
        roots, dead = self.roots(sched)
        reader = AbstractReader(self.opaque, dead, {id(sched.strategy): "strategy"})
        out = _Hashing()
        try:
            _Pickler(out, reader).dump(roots)
        except (TypeError, AttributeError) as e:
            raise UnknownState(f"liveness: cannot write the state by value: {e}") from None
        return out.h.digest(), tuple(reader.counters)
