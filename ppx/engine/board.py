"""The status board: a small shared-memory file every rank writes and the supervisor reads.

It holds, per rank, liveness and progress counters, the blocked-on record (written before
every blocking channel operation, cleared after), per-wire sent/consumed counters (what the
readiness contract reads) and a ring of the last channel operations (the post-mortem
timeline). Plain int64 stores into an mmap: cheap enough to leave on in every run.
"""

from __future__ import annotations

import os
import time
from enum import IntEnum

import numpy as np

from ppx.core import Kind

NUM_KINDS = max(int(k) for k in Kind) + 1
RING = 256
RING_FIELDS = 8  # t_ns, op, peer, kind, slot, pass_id, seq, dur_ns


class F(IntEnum):
    """Per-rank scalar fields."""

    PID = 0
    STATE = 1
    HEARTBEAT_NS = 2
    PASS = 3
    EPOCH = 4
    TOKENS = 5
    FINISHED = 6
    WORK_PASSES = 7
    VOIDS = 8
    RETRACTIONS = 9
    FLIPS = 10
    PHASE = 11  # 0 = pp, 1 = tp
    BLK_OP = 12
    BLK_PEER = 13
    BLK_KIND = 14
    BLK_SLOT = 15
    BLK_PASS = 16
    BLK_SEQ = 17
    BLK_SINCE_NS = 18
    BLK_WIDTH = 19
    RING_HEAD = 20
    INFLIGHT = 21  # slots with a batch in flight right now
    MAX_INFLIGHT = 22
    PREFILL_TOKENS = 23
    NUM = 32


class Op(IntEnum):
    NONE = 0
    SEND = 1
    RECV = 2
    FLUSH = 3
    COMPUTE = 4
    PASS = 5
    PULL = 6
    READY = 7
    CONNECT = 8  # a communicator's creation, waiting for its other members (sim nccl)
    COLLECTIVE = 9  # a world collective of the pass (ordering step `collective`): every peer

    @property
    def label(self) -> str:
        return self.name.lower()


# the peer of a blocked-on record that waits on every other rank (a world collective)
ALL_PEERS = -2


class State(IntEnum):
    INIT = 0
    RUNNING = 1
    BLOCKED = 2
    DONE = 3
    ERROR = 4


# plain int indices for the hot path (an IntEnum index costs numpy an __index__ call)
_OP, _HEAD = int(F.BLK_OP), int(F.RING_HEAD)
_REC = slice(int(F.BLK_PEER), int(F.BLK_WIDTH) + 1)
assert [int(x) for x in (F.BLK_PEER, F.BLK_KIND, F.BLK_SLOT, F.BLK_PASS, F.BLK_SEQ)] == list(
    range(int(F.BLK_PEER), int(F.BLK_PEER) + 5)
) and int(F.BLK_SINCE_NS) + 1 == int(F.BLK_WIDTH) == int(F.BLK_PEER) + 6

RANK_BLOCK = F.NUM + 2 * 64 * NUM_KINDS + RING * RING_FIELDS  # supports worlds up to 64


class Board:
    """One mmap'd int64 array: `world` rank blocks laid out back to back."""

    def __init__(self, path: str | None, world: int, create: bool = False) -> None:
        if world > 64:
            raise ValueError("the status board supports at most 64 ranks")
        self.path, self.world = path, world
        shape = (world, RANK_BLOCK)
        if path is None:  # every rank in this process (the simulator): plain memory
            self.arr = np.zeros(shape, dtype=np.int64)
        elif create:
            self.arr = np.memmap(path, dtype=np.int64, mode="w+", shape=shape)
            self.arr[:] = 0
            self.arr.flush()
        else:
            self.arr = np.memmap(path, dtype=np.int64, mode="r+", shape=shape)

    def clock_ns(self) -> int:
        """Nanoseconds on the board's clock (SimBoard: the virtual clock)."""
        return time.monotonic_ns()

    # -- views ------------------------------------------------------------------------
    def fields(self, rank: int) -> np.ndarray:
        return self.arr[rank, : F.NUM]

    def sent(self, rank: int) -> np.ndarray:
        """sent[dst, kind] by `rank`."""
        base = F.NUM
        return self.arr[rank, base : base + 64 * NUM_KINDS].reshape(64, NUM_KINDS)

    def consumed(self, rank: int) -> np.ndarray:
        """consumed[src, kind] by `rank`."""
        base = F.NUM + 64 * NUM_KINDS
        return self.arr[rank, base : base + 64 * NUM_KINDS].reshape(64, NUM_KINDS)

    def ring(self, rank: int) -> np.ndarray:
        base = F.NUM + 2 * 64 * NUM_KINDS
        return self.arr[rank, base:].reshape(RING, RING_FIELDS)

    # -- readers used by the watchdog -------------------------------------------------
    def blocked_on(self, rank: int) -> dict | None:
        f = self.fields(rank)
        if int(f[F.BLK_OP]) == Op.NONE:
            return None
        kind = int(f[F.BLK_KIND])
        return {
            "rank": rank,
            "op": Op(int(f[F.BLK_OP])).label,
            "peer": int(f[F.BLK_PEER]),
            "kind": Kind(kind).label if kind in Kind._value2member_map_ else "any",
            "slot": int(f[F.BLK_SLOT]),
            "pass_id": int(f[F.BLK_PASS]),
            "seq": int(f[F.BLK_SEQ]),
            "width": int(f[F.BLK_WIDTH]),
            "since_s": round((self.clock_ns() - int(f[F.BLK_SINCE_NS])) / 1e9, 3),
        }

    def ops(self, rank: int) -> list[dict]:
        """The op ring in time order (oldest first)."""
        ring = np.array(self.ring(rank))
        head = int(self.fields(rank)[F.RING_HEAD])
        n = min(head, RING)
        order = [(head - n + i) % RING for i in range(n)]
        rows = []
        for i in order:
            t, op, peer, kind, slot, pass_id, seq, dur = (int(x) for x in ring[i])
            rows.append(
                {
                    "t_ns": t,
                    "rank": rank,
                    "op": Op(op).label if op in Op._value2member_map_ else str(op),
                    "peer": peer,
                    "kind": Kind(kind).label if kind in Kind._value2member_map_ else "",
                    "slot": slot,
                    "pass_id": pass_id,
                    "seq": seq,
                    "dur_s": dur / 1e9,
                }
            )
        return rows

    def close(self) -> None:
        del self.arr


class RankBoard:
    """A rank's writer handle on its own block (and readers of its peers' counters)."""

    def __init__(self, board: Board, rank: int) -> None:
        self.board, self.rank = board, rank
        self.f = board.fields(rank)
        self.sent = board.sent(rank)
        self.consumed = board.consumed(rank)
        self.ring = board.ring(rank)
        self.f[F.PID] = os.getpid()
        self._head = int(self.f[F.RING_HEAD])
        # the board's clock: wall time, or the simulator's virtual time (sim.world_parts.SimBoard),
        # so a simulated state holds no wall-clock reading (the exhaustive search's
        # fingerprint compares states by value)
        self._ns = board.clock_ns
        self.enabled = True  # watch.blocked_on=false turns the records off (overhead benchmark)

    def set(self, field: F, value: int) -> None:
        self.f[field] = value

    def add(self, field: F, value: int = 1) -> None:
        self.f[field] += value

    def beat(self, pass_id: int) -> None:
        self.f[F.HEARTBEAT_NS] = self._ns()
        self.f[F.PASS] = pass_id

    def block(
        self, op: Op, peer: int, kind: int, slot: int, pass_id: int, seq: int, width: int = -1
    ) -> int:
        """Write the blocked-on record *before* the blocking call: a wedge leaves it behind."""
        now = self._ns()
        if not self.enabled:
            return now
        # one store for the whole record (BLK_PEER..BLK_WIDTH are adjacent), then the op
        self.f[_REC] = (peer, kind, slot, pass_id, seq, now, width)
        self.f[_OP] = op  # last: a reader that sees the op sees the rest of the record
        return now

    def unblock(
        self, op: Op, peer: int, kind: int, slot: int, pass_id: int, seq: int, since: int
    ) -> None:
        if not self.enabled:
            return
        self.f[_OP] = 0  # Op.NONE
        self.record(op, peer, kind, slot, pass_id, seq, since)

    def record(
        self, op: Op, peer: int, kind: int, slot: int, pass_id: int, seq: int, since: int
    ) -> None:
        now = self._ns()
        head = self._head  # only this rank writes its head: no read back from the board
        self.ring[head % RING] = (since, op, peer, kind, slot, pass_id, seq, now - since)
        self._head = self.f[_HEAD] = head + 1

    def peer_consumed(self, dst: int, kind: int) -> int:
        """How many messages of `kind` from this rank rank `dst` has consumed (flush on nccl)."""
        return int(self.board.consumed(dst)[self.rank, kind])

    def peer_sent(self, src: int, kind: int) -> int:
        """How many messages of `kind` rank `src` has posted to this rank (readiness evidence)."""
        return int(self.board.sent(src)[self.rank, kind])
