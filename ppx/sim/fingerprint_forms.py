"""What each kind of object becomes in a state's digest (fingerprint.py): the readers.

The digest is a pickle of the run's state, and pickle already writes containers, instances
(their `__dict__` or slots), strings and numbers by value, with shared references as back
references. What it cannot write, or would write as something that is not state, is
reduced here to a plain tuple that says what the future can read of it:

- a tensor or an array: dtype, shape and bytes (never its storage's address);
- a function (a wait condition, a callback): its name, defaults and what its closure
  captured; a frame: code, instruction offset and every local; a greenlet or a generator:
  its suspended frames, innermost last;
- the scheduler and its tasks: a mark (their state leads the digest: fingerprint.py);
- the status board: its live columns (fields and wire counters, not the op ring);
- a class: its module and name; the exploration's immutable inputs: their identity.

Canonical forms (two states the engine cannot tell apart, written alike):

- `SimWire.queues`: a map (src, dst, tag) -> FIFO that a rank only ever indexes by key, and
  a `defaultdict`, so an empty FIFO and no entry are the same to every reader; written as
  the non-empty queues sorted by key. (Unsorted, the order two ranks first sent in -- two
  commuting steps -- made two digests of one state.)
- `_Collective.parts`: rank -> tensor, read by rank (`parts[src]`, rank order) and by size;
  written sorted by rank (it was kept in arrival order).
- a frame's locals: by name (`locals_of`: `f_locals` comes in the order of earlier looks).
"""

from __future__ import annotations

import enum
import io
import types

import greenlet
import numpy as np
import torch
from omegaconf import DictConfig, ListConfig

from ppx.engine.board import NUM_KINDS, Board, F, RankBoard
from ppx.engine.model.hash_mirror import PoolMirror
from ppx.engine.transport.sim import SimWire, _Collective
from ppx.sim.scheduler import Scheduler, Task

# the board's columns a rank reads: fields and wire counters (the op ring after them is history)
BOARD_LIVE = int(F.NUM) + 2 * 64 * NUM_KINDS
# written by identity: built once per exploration and never written by a run, or no state
# (the hash model's PoolMirror: a cache of what its pool's bytes, written by value, decode to)
OPAQUE_TYPES = (io.IOBase, greenlet.greenlet, torch.nn.Module, DictConfig, ListConfig, PoolMirror)
# a parked receive's output buffer (a frame's local) is overwritten whole before anything
# reads it: its bytes until then (torch.empty's leftovers) are no state
OVERWRITTEN = {"SimTransport.recv": frozenset({"out"})}


class UnknownState(TypeError):
    """The digest met an object it cannot write by value (it would have to guess)."""


def _mark(*what):  # the reconstructor every reduced object names: the digest never loads
    return what


# A reduced object's contents go in the reduce value's *state*: pickle numbers the object
# before it writes its state, so a cycle through them (a callback whose closure holds the
# object that holds the callback) is a back reference, not an endless descent


def stack_of(frame) -> list:
    """A suspended stack's frames, outermost first."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


class Reader:
    """The pickler's `reducer_override` for one digest: `dead` (ids of overwritten buffers)
    and `opaque` (id of each immutable input -> its place) are the digest's own."""

    def __init__(self, opaque: dict[int, int], dead: set[int], marks: dict[int, str]) -> None:
        self.opaque, self.dead, self.marks = opaque, dead, marks

    def __call__(self, o):
        if o is _mark:  # the reconstructor itself: by name, as pickle writes a function
            return NotImplemented
        key = id(o)
        place = self.opaque.get(key)
        if place is not None:
            return _mark, ("#", place)
        mark = self.marks.get(key)
        if mark is not None:
            return _mark, (mark,)
        reader = _READERS.get(type(o))
        if reader is None:
            reader = _READERS[type(o)] = _reader_of(type(o))
        return reader(self, o)


def _tensor(r: Reader, o):
    if id(o) in r.dead:
        return _mark, ("buffer", str(o.dtype), tuple(o.shape))
    return _mark, (
        "T",
        str(o.dtype),
        tuple(o.shape),
        o.detach().cpu().contiguous().numpy().tobytes(),
    )


def _ndarray(r: Reader, o):
    return _mark, ("A", o.dtype.str, o.shape, np.ascontiguousarray(o).tobytes())


def _function(r: Reader, o):
    cells = []
    for c in o.__closure__ or ():  # what a closure (a wait condition) captured is state
        try:
            cells.append(c.cell_contents)
        except ValueError:  # an empty cell
            cells.append("<empty>")
    return _mark, ("F", o.__module__, o.__qualname__), (o.__defaults__, o.__kwdefaults__, cells)


def locals_of(fr) -> dict:
    """A frame's locals by name. Not `f_locals` as it comes: Python 3.11 keeps one such dict
    per frame, refreshed in place at each look, so a local bound since the previous look
    goes to its end; its order is the history of the looks (a walk looks at every new
    state, a replay at its last), and no code iterates its own locals."""
    return dict(sorted(fr.f_locals.items()))


def _frame(r: Reader, fr):
    code = fr.f_code
    return _mark, ("fr", code.co_filename, code.co_qualname, fr.f_lasti), locals_of(fr)


def _generator(r: Reader, o):
    return _mark, ("G",), stack_of(o.gi_frame)


def _class(r: Reader, o):
    return _mark, ("C", o.__module__, o.__qualname__)


def _module(r: Reader, o):
    return _mark, ("mod", o.__name__)


def _opaque(r: Reader, o):
    return _mark, ("#", type(o).__qualname__)


def _enum(r: Reader, o):
    return _mark, ("E", type(o).__qualname__, o.name)


def _task(r: Reader, o):
    return _mark, ("task", o.tid)  # every task's state is a root of the digest


def _sched(r: Reader, o):
    return _mark, ("sched",)  # its state leads the digest


def _board(r: Reader, o):
    return _mark, ("board", o.arr[:, :BOARD_LIVE].tobytes())


def _rankboard(r: Reader, o):
    # the views of its own block are the board's; its ring head only places the next op
    # in the ring, which no rank reads
    return _mark, ("rankboard", o.rank, o.enabled), o.board


def _wire(r: Reader, o: SimWire):
    state = dict(vars(o))
    state["queues"] = sorted((k, q) for k, q in o.queues.items() if q)
    state["collectives"] = sorted(o.collectives.items(), key=lambda kv: kv[0])
    return _mark, ("wire",), state


def _collective(r: Reader, o: _Collective):
    return _mark, ("coll", o.op, o.left), sorted(o.parts.items(), key=lambda kv: kv[0])


def _default(r: Reader, o):
    return NotImplemented  # pickle's own: an instance's __dict__ / slots, a C object's reduce


_READERS: dict[type, object] = {}
_BY_BASE = (  # the first base a type has picks its reader
    (OPAQUE_TYPES, _opaque),
    ((torch.Tensor,), _tensor),
    ((np.ndarray,), _ndarray),
    ((type,), _class),
    ((types.ModuleType,), _module),
    ((enum.Enum,), _enum),
    ((types.FunctionType,), _function),
    ((types.FrameType,), _frame),
    ((types.GeneratorType,), _generator),
    ((Scheduler,), _sched),
    ((Task,), _task),
    ((Board,), _board),
    ((RankBoard,), _rankboard),
    ((SimWire,), _wire),
    ((_Collective,), _collective),
)


def _reader_of(tp: type):
    for bases, reader in _BY_BASE:
        if issubclass(tp, bases):
            return reader
    return _default
