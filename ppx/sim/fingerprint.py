"""A simulated run's state as one digest: what the exhaustive search's visited set holds.

Taken at a scheduling point (every task parked, none running), the digest covers every
object the future of the run can read:

- the scheduler's own state: the virtual clock, the pending kills, and per task whether it
  is done or killed, what it waits for (its wait condition: a closure, written with the
  values it captured) and its wake-up time;
- each task's position in its loop: the whole suspended stack of its greenlet, frame by
  frame (code object and instruction offset) with every local variable of every frame;
- everything reachable from those locals, by value: each rank's `RankLoop`, its protocol
  state, scheduler, KV caches (tensors by dtype, shape and bytes), flip control; the status
  board (its fields and wire counters); the simulated wire's queues; the frontend's driver
  and its queues -- all reached from `self` of some frame.

The digest is blake2b-128 over a pickle of that (protocol 5, written straight into the
hash): pickle writes containers and instances by value in C, numbers objects in the order it
meets them (so addresses never enter, and two references to one object are a back
reference), and calls fingerprint_forms.Reader for what it cannot write by value (frames,
closures, tensors) and for the canonical forms (the wire's queues, a collective's parts).
A collision among a million states has probability ~1e-27.

Left out, each because the future cannot read it: the strategy (it chooses, it is not
chosen over), the scheduler's history (choices made, steps taken: the step bound is
2,000,000 steps and a bounded scenario ends far inside it), the board's op ring (the
post-mortem's timeline, written, never read by a rank), a parked receive's output buffer
(overwritten whole before it is read), and the exploration's inputs (the configs, the
oracle, the workload, and the stage models and KV caches its runs share:
runner.SharedModels, whose leftovers no run reads), the same objects in every run, written
by identity: as their place in a walk over the inputs, so two explorations of one scenario
in one process give one state one digest. Pickle never hands an exact dict, list, tuple or set to the reader, so
such an input would be written by value: it is refused.
Module globals are not walked: the engine keeps no mutable state there (the comparison
tests, tests/sim/test_exhaustive_ends.py, reach the same ends with caching on and off).

Two states with one digest have the same future under the same choices, so the search may
skip the second one (exhaustive.py).
"""

from __future__ import annotations

import hashlib
import pickle
import types
from collections import deque

import torch

from ppx.sim.fingerprint_forms import OVERWRITTEN, Reader, UnknownState, stack_of
from ppx.sim.scheduler import Scheduler

__all__ = ["Fingerprint", "UnknownState"]

# the containers pickle writes itself, never handing them to the reader (pickle's docs:
# reducer_override is not called for exact dicts, lists, tuples, sets, frozensets)
PLAIN_CONTAINERS = (dict, list, tuple, set, frozenset)


class _Hashing:
    """A file that is a hash: pickle writes its frames straight into it."""

    def __init__(self) -> None:
        self.h = hashlib.blake2b(digest_size=16)
        self.write = self.h.update


class _Pickler(pickle.Pickler):
    def __init__(self, file, reader: Reader) -> None:
        # the C pickler looks its override up once, when it is made: bound before that
        self.reducer_override = reader
        super().__init__(file, protocol=5)


class Fingerprint:
    """`of(sched)`: the digest of the simulated run's state. `opaque`: objects that stand
    by identity (the exploration's immutable inputs; see the module docstring)."""

    def __init__(self, opaque: tuple = ()) -> None:
        # pickle never asks its reader about an exact dict, list, tuple or set: such an input
        # would be written by value, with whatever earlier runs left in it (runner.py's
        # SharedModels is a dict subclass for that reason)
        plain = [type(o).__name__ for o in opaque if type(o) in PLAIN_CONTAINERS]
        if plain:
            raise TypeError(f"fingerprint: an opaque input is a plain {plain[0]}: it would be "
                            "written by value (wrap it in a subclass)")  # fmt: skip
        # every object reachable from an opaque input is opaque too (a rank's view of the
        # typed config is a part of it): found once here, by identity ever after
        self._keep = reachable(opaque)  # alive while this lives: their ids stay theirs
        # each written as its place in that walk, not its address: two explorations of one
        # scenario in one process (a reduced and a plain walk) then give one state one digest
        self.opaque: dict[int, int] = {id(o): i for i, o in enumerate(self._keep)}

    def of(self, sched: Scheduler) -> bytes:
        out = _Hashing()
        self.dump(sched, out)
        return out.h.digest()

    def of_object(self, o) -> bytes:
        """The digest of one object graph, written as a state's parts are."""
        out = _Hashing()
        self.dump_roots(o, set(), {}, out)
        return out.h.digest()

    def dump(self, sched: Scheduler, file) -> None:
        """The state, pickled into `file`."""
        roots, dead = self.roots(sched)
        # the strategy chooses; it is not part of what is chosen over (a reference to it,
        # from the supervisor, reads as a constant)
        self.dump_roots(roots, dead, {id(sched.strategy): "strategy"}, file)

    def dump_roots(self, roots, dead: set[int], marks: dict[int, str], file) -> None:
        p = _Pickler(file, Reader(self.opaque, dead, marks))
        try:
            p.dump(roots)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            raise UnknownState(f"fingerprint: cannot write the state by value: {e}") from None

    def roots(self, sched: Scheduler) -> tuple[list, set[int]]:
        """What leads the digest (the scheduler's state, each task's wait and stack), and
        the ids of the buffers no future step reads before overwriting them."""
        roots: list = [sched.now, sorted(sched.kills.items())]
        dead: set[int] = set()
        for t in sched.tasks:
            frames = stack_of(t.glet.gr_frame) if not t.done and t.glet is not None else []
            roots += [t.tid, t.done, t.killed, t.label, t.wake_at, t.pred, frames]
            for fr in frames:
                names = OVERWRITTEN.get(fr.f_code.co_qualname)
                for name in names or ():
                    buf = fr.f_locals.get(name)
                    if isinstance(buf, torch.Tensor):
                        dead.add(id(buf))
        return roots, dead


def reachable(roots: tuple) -> list:
    """Every container and instance reachable from `roots` through dicts, sequences, sets
    and instance attributes (not through classes, modules or functions)."""
    scalars = (int, float, str, bytes, bool, type(None), complex)
    out, seen, todo = [], set(), list(roots)
    while todo:
        o = todo.pop()
        if type(o) in scalars or id(o) in seen or isinstance(o, (type, types.ModuleType)):
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
