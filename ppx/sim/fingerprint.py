"""A simulated run's state as one digest: what the exhaustive search's visited set holds.

Taken at a scheduling point (every task parked, none running), the digest covers every
object the future of the run can read:

- the scheduler's own state: the virtual clock, the pending kills, and per task whether it
  is done or killed, what it waits for (its wait condition: a closure, walked with the
  values it captured) and its wake-up time;
- each task's position in its loop: the whole suspended stack of its greenlet, frame by
  frame (code object and instruction offset) with every local variable of every frame;
- everything reachable from those locals, walked by value: each rank's `RankLoop`, its
  protocol state, scheduler, KV caches (tensors by dtype, shape and bytes), flip control;
  the status board (its fields and wire counters); the simulated wire's queues; the
  frontend's driver and its queues -- all reached from `self` of some frame.

Objects are numbered in the order the walk meets them, so two states that differ only in
which addresses their objects live at get the same digest, and sharing (two references to
one object) is part of it. Left out, each because the future cannot read it: the strategy
(it chooses, it is not chosen over), the scheduler's history (choices made, steps taken:
the step bound is 2,000,000 steps and a bounded scenario ends far inside it), the board's
op ring and ring head (the post-mortem's timeline, written, never read by a rank), and the
immutable per-exploration objects (stage models, the configs, the oracle), which are the
same object in every run and stand in the digest by identity. Module globals are not
walked: the engine keeps no mutable state there (a test pins this, see
tests/sim/test_exhaustive_ends.py: caching on and off reach the same set of ends).

Two states with one digest have the same future under the same choices, so the search may
skip the second one (exhaustive.py). The digest is blake2b-128 over the walk's token list
(marshal-encoded): a collision among a million states has probability ~1e-27.
"""

from __future__ import annotations

import enum
import hashlib
import io
import marshal
import random
import types
from collections import deque

import greenlet
import numpy as np
import torch
from omegaconf import DictConfig, ListConfig

from ppx.engine.board import NUM_KINDS, Board, F, RankBoard
from ppx.sim.scheduler import Scheduler, Task

# the board's columns a rank reads: fields and wire counters (the op ring after them is history)
_BOARD_LIVE = int(F.NUM) + 2 * 64 * NUM_KINDS
_SCALARS = (int, float, str, bytes, bool, type(None), complex)
_OPAQUE_TYPES = (
    io.IOBase,
    greenlet.greenlet,
    torch.nn.Module,  # stage models: built once per exploration, never written by a run
    DictConfig,
    ListConfig,
    types.ModuleType,
    type,
)


# a parked receive's output buffer (a frame's local) is overwritten whole before anything
# reads it: its bytes until then (torch.empty's leftovers) are no state
_OVERWRITTEN = {"SimTransport.recv": frozenset({"out"})}


class UnknownState(TypeError):
    """The walk met an object it cannot read by value (it would have to guess)."""


class Fingerprint:
    """`of(sched)`: the digest of the simulated run's state. `opaque`: objects that stand
    by identity (the exploration's immutable inputs; see the module docstring)."""

    def __init__(self, opaque: tuple = ()) -> None:
        # every object reachable from an opaque input is opaque too (a rank's view of the
        # typed config is a part of it): walked once here, by identity ever after
        self._keep = _reachable(opaque)  # alive while this lives: their ids stay theirs
        self.opaque: set[int] = {id(o) for o in self._keep}
        self._temps: list = []  # objects made during one walk (kept so no id is reused in it)

    def of(self, sched: Scheduler) -> bytes:
        return hashlib.blake2b(marshal.dumps(self.tokens(sched)), digest_size=16).digest()

    def tokens(self, sched: Scheduler) -> list:
        out: list = [sched.now, sorted(sched.kills.items())]
        # the strategy chooses; it is not part of what is chosen over (a reference to it,
        # from the supervisor, reads as a constant)
        seen: dict[int, int] = {id(sched.strategy): -1}
        for t in sched.tasks:
            out += [t.tid, t.done, t.killed, t.label, t.wake_at]
            self._walk(t.pred, out, seen)
            if not t.done and t.glet is not None:
                self._stack(t.glet.gr_frame, out, seen)
        self._temps.clear()
        return out

    def _stack(self, frame, out: list, seen: dict) -> None:
        frames = []
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
        out.append(len(frames))
        for fr in frames:  # where the task is: code and offset, frame by frame
            code = fr.f_code
            out += [code.co_filename, code.co_qualname, fr.f_lasti]
            local = fr.f_locals
            self._temps += (fr, local)  # ids stay theirs for the whole walk
            dead = _OVERWRITTEN.get(code.co_qualname)
            if dead is not None:
                out.append("D")
                for name, value in local.items():
                    out.append(name)
                    if name in dead and isinstance(value, torch.Tensor):
                        seen[id(value)] = len(seen)
                        out += ["buffer", str(value.dtype), tuple(value.shape)]
                    else:
                        self._walk(value, out, seen)
            else:
                self._walk(local, out, seen)

    def _walk(self, o, out: list, seen: dict) -> None:
        tp = type(o)
        if tp in _SCALARS:
            out.append(o)
            return
        key = id(o)
        if key in seen:  # a back reference: the object's number in this walk
            out += ["@", seen[key]]
            return
        seen[key] = len(seen)
        if key in self.opaque:
            out += ["#", key]
            return
        handler = _HANDLERS.get(tp)
        if handler is None:
            handler = _HANDLERS[tp] = _handler_of(tp)
        handler(self, o, out, seen)

    # -- one reader per kind of object (chosen once per type: _handler_of) -------------------
    def _opaque(self, o, out, seen) -> None:
        out += ["#", type(o).__qualname__]

    def _seq(self, o, out, seen) -> None:
        out += ["L", type(o).__qualname__, len(o)]
        walk = self._walk
        for x in o:
            walk(x, out, seen)
        if hasattr(o, "__dict__"):  # a namedtuple subclass with attributes
            walk(o.__dict__, out, seen)

    def _dict(self, o, out, seen) -> None:
        out += ["D", type(o).__qualname__, len(o)]
        walk = self._walk
        factory = getattr(o, "default_factory", None)
        if factory is not None:
            walk(factory, out, seen)
        for k, v in o.items():  # insertion order: what the engine iterates in
            walk(k, out, seen)
            walk(v, out, seen)

    def _tensor(self, o, out, seen) -> None:
        out += ["T", str(o.dtype), tuple(o.shape), o.detach().cpu().contiguous().numpy().tobytes()]

    def _ndarray(self, o, out, seen) -> None:
        out += ["A", o.dtype.str, o.shape, np.ascontiguousarray(o).tobytes()]

    def _enum(self, o, out, seen) -> None:
        out += ["E", type(o).__qualname__, o.name]

    def _scalar_subclass(self, o, out, seen) -> None:  # an int or str subclass
        out += [type(o).__qualname__, _plain(o)]

    def _function(self, o, out, seen) -> None:
        out += ["F", o.__module__, o.__qualname__]
        self._walk(o.__defaults__, out, seen)
        self._walk(o.__kwdefaults__, out, seen)
        cells = o.__closure__ or ()
        out.append(len(cells))
        for c in cells:  # what a closure (a wait condition) captured is state
            try:
                self._walk(c.cell_contents, out, seen)
            except ValueError:  # an empty cell
                out.append("<empty>")

    def _method(self, o, out, seen) -> None:
        out += ["M", o.__func__.__qualname__]
        self._walk(o.__self__, out, seen)

    def _builtin(self, o, out, seen) -> None:
        owner = o.__self__
        out += ["B", o.__qualname__]
        if owner is not None and not isinstance(owner, types.ModuleType):
            self._walk(owner, out, seen)

    def _generator(self, o, out, seen) -> None:
        out.append("G")
        if o.gi_frame is not None:
            self._stack(o.gi_frame, out, seen)

    def _sched(self, o, out, seen) -> None:
        out.append("sched")  # its state leads the digest (tokens)

    def _task(self, o, out, seen) -> None:
        out += ["task", o.tid]  # every task's state is a root of the digest

    def _board(self, o, out, seen) -> None:
        out += ["board", o.arr[:, :_BOARD_LIVE].tobytes()]

    def _rankboard(self, o, out, seen) -> None:
        # the views of its own block are the board's (walked there); its ring head only
        # places the next op in the ring, which no rank reads
        out += ["rankboard", o.rank, o.enabled]
        self._walk(o.board, out, seen)

    def _random(self, o, out, seen) -> None:
        out += ["R", o.getstate()]

    def _object(self, o, out, seen) -> None:
        tp = type(o)
        out += ["O", tp.__module__, tp.__qualname__]
        d = getattr(o, "__dict__", None)
        if d is not None:
            self._dict(d, out, seen)
        for name in _slots(tp):
            self._walk(getattr(o, name, "<unset>"), out, seen)

    def _printed(self, o, out, seen) -> None:
        # a C object: by what pickling would keep of it (a list iterator: its list and
        # position), else by what it prints (itertools.count(5)); an address is no state
        tp = type(o)
        try:
            reduced = o.__reduce__()
        except TypeError:
            reduced = None
        if isinstance(reduced, tuple):
            self._temps.append(reduced)  # its id must not come back within this walk
            out += ["?", tp.__qualname__]
            self._walk(reduced, out, seen)
            return
        text = repr(o)
        if "0x" in text:
            raise UnknownState(f"fingerprint: cannot read a {tp.__module__}.{tp.__qualname__}")
        out += ["?", tp.__qualname__, text]


_HANDLERS: dict[type, object] = {}
_BY_BASE = (  # the first base a type has picks its reader
    (_OPAQUE_TYPES, Fingerprint._opaque),
    ((dict,), Fingerprint._dict),
    ((list, tuple, deque, set, frozenset), Fingerprint._seq),
    ((torch.Tensor,), Fingerprint._tensor),
    ((np.ndarray,), Fingerprint._ndarray),
    ((enum.Enum,), Fingerprint._enum),
    (_SCALARS, Fingerprint._scalar_subclass),
    ((types.FunctionType,), Fingerprint._function),
    ((types.MethodType,), Fingerprint._method),
    ((types.BuiltinFunctionType, types.BuiltinMethodType), Fingerprint._builtin),
    ((types.FrameType,), Fingerprint._stack),
    ((types.GeneratorType,), Fingerprint._generator),
    ((Scheduler,), Fingerprint._sched),
    ((Task,), Fingerprint._task),
    ((Board,), Fingerprint._board),
    ((RankBoard,), Fingerprint._rankboard),
    ((random.Random,), Fingerprint._random),
)


def _handler_of(tp: type):
    for bases, handler in _BY_BASE:
        if issubclass(tp, bases):
            return handler
    if hasattr(tp, "__dict__") and ("__dict__" in dir(tp) or _slots(tp)):
        return Fingerprint._object
    return Fingerprint._printed


def _reachable(roots: tuple) -> list:
    """Every container and instance reachable from `roots` through dicts, sequences, sets
    and instance attributes (not through classes, modules or functions)."""
    out, seen, todo = [], set(), list(roots)
    while todo:
        o = todo.pop()
        if type(o) in _SCALARS or id(o) in seen or isinstance(o, (type, types.ModuleType)):
            continue
        seen.add(id(o))
        out.append(o)
        if isinstance(o, dict):
            todo += [*o.keys(), *o.values()]
        elif isinstance(o, (list, tuple, set, frozenset, deque)):
            todo += list(o)
        elif hasattr(o, "__dict__") and not callable(o) and not isinstance(o, torch.nn.Module):
            todo.append(vars(o))
    return out


def _plain(o):
    for base in (int, float, str, bytes, complex):
        if isinstance(o, base):
            return base(o)
    return o


_SLOTS: dict[type, tuple[str, ...]] = {}


def _slots(tp: type) -> tuple[str, ...]:
    """Every slot name the class and its bases declare (a slotted object has no __dict__)."""
    names = _SLOTS.get(tp)
    if names is None:
        found: list[str] = []
        for c in tp.__mro__:
            declared = c.__dict__.get("__slots__", ())
            found += [declared] if isinstance(declared, str) else list(declared)
        names = _SLOTS[tp] = tuple(s for s in found if s not in ("__dict__", "__weakref__"))
    return names
