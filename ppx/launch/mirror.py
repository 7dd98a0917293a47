"""The supervisor's side of a torchrun run: remote ranks as process-like handles, and a thread
that copies what the node agents publish in the c10d store into the local board and run dir.

Monotonic clocks differ across machines, so each published row carries its publisher's
`monotonic_ns` and the mirror shifts the row's timestamps (blocked-since, heartbeat, op ring)
onto this machine's clock: the watchdog's "blocked for 3 s" means the same on every node.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from ppx.engine.board import RANK_BLOCK, RING, RING_FIELDS, Board, F
from ppx.launch.store import StoreSpec, get_text, has, pack_row, unpack_row

SYNC_S = 0.1
SILENT_DEAD_S = 3.0  # an agent that stopped publishing for this long is gone (killed node)
STACK_WAIT_S = 15.0  # agents run faulthandler and py-spy one after the other


class RemoteRank:
    """What the supervisor's loops and teardown use of an `mp.Process`, for a remote rank."""

    pid = None

    def __init__(self, rank: int, mirror: Mirror) -> None:
        self.rank, self.mirror = rank, mirror
        self.exitcode: int | None = None
        self.name = f"ppx-rank{rank}@torchrun"

    def is_alive(self) -> bool:
        return self.exitcode is None

    def join(self, timeout: float | None = None) -> None:
        deadline = time.time() + (timeout if timeout is not None else 1e9)
        while self.exitcode is None and time.time() < deadline:
            time.sleep(SYNC_S)

    def terminate(self) -> None:
        self.mirror.finish()

    kill = terminate


def shift_row(row: np.ndarray, offset_ns: int) -> np.ndarray:
    """A remote board row on this machine's monotonic clock (zero stamps stay zero)."""
    row = row.copy()
    for f in (F.BLK_SINCE_NS, F.HEARTBEAT_NS):
        if row[f]:
            row[f] += offset_ns
    ring = row[RANK_BLOCK - RING * RING_FIELDS :].reshape(RING, RING_FIELDS)
    ring[:, 0] = np.where(ring[:, 0] != 0, ring[:, 0] + offset_ns, 0)
    return row


def pull_row(store, board: Board, r: int, stamps: dict[int, int]) -> bool:
    """Copy rank r's published row into `board` (on this machine's clock); True when it was
    published anew since the last call (its publisher is alive)."""
    if not has(store, f"board/{r}"):
        return False
    stamp, row = unpack_row(store.get(f"board/{r}"))
    if stamp == stamps.get(r):
        return False
    stamps[r] = stamp
    board.arr[r, :] = shift_row(row, time.monotonic_ns() - stamp)
    return True


class Mirror:
    def __init__(self, spec: StoreSpec, board: Board, run_dir: str, local: set[int]) -> None:
        self.spec, self.board, self.run_dir = spec, board, run_dir
        self.store = spec.connect()
        self.local = sorted(local)
        self.remote = [RemoteRank(r, self) for r in range(board.world) if r not in local]
        self.stamp: dict[int, int] = {}
        self.seen: dict[int, float] = {}  # rank -> local monotonic time of its last publish
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ppx-mirror", daemon=True)

    def start(self, t0: float) -> None:
        self.store.set("t0", repr(t0))
        self.thread.start()

    def _run(self) -> None:
        store = self.spec.connect()  # the thread's own connection
        while not self.stop.is_set():
            try:
                self.sync(store)
            except Exception as e:  # noqa: BLE001 - the store went away: remote ranks are gone
                for p in self.remote:
                    if p.exitcode is None:
                        p.exitcode = -1
                print(f"ppx: store unreachable: {type(e).__name__}: {e}", flush=True)
                return
            self.stop.wait(SYNC_S)

    def sync(self, store) -> None:
        now = time.monotonic()
        # the local ranks' rows go out too: remote ranks read their peers' sent/consumed
        # counters (readiness, the nccl flush) from their own node's board
        for r in self.local:
            store.set(f"board/{r}", pack_row(self.board.arr[r], time.monotonic_ns()))
        for p in self.remote:
            r = p.rank
            if p.exitcode is not None:
                continue
            if pull_row(store, self.board, r, self.stamp):
                self.seen[r] = now
            if has(store, f"exit/{r}"):
                self._land(store, r)
                p.exitcode = int(get_text(store, f"exit/{r}"))
            elif r in self.seen and now - self.seen[r] > SILENT_DEAD_S:
                p.exitcode = -9  # its agent stopped publishing: killed with its node

    def _land(self, store, r: int) -> None:
        """A remote rank's report and event log, written where the local ones are."""
        ranks = os.path.join(self.run_dir, "ranks")
        for key, name in (
            (f"report/{r}", f"rank{r}.json"),
            (f"events/{r}", f"rank{r}.events.jsonl"),
        ):
            if has(store, key):
                with open(os.path.join(ranks, name), "w") as f:
                    f.write(get_text(store, key))

    def silent(self, after_s: float) -> list[int]:
        """Remote ranks that stopped publishing without an exit record."""
        now = time.monotonic()
        return [
            p.rank
            for p in self.remote
            if p.exitcode == -9
            or (p.exitcode is None and now - self.seen.get(p.rank, now) > after_s)
        ]

    def request_stacks(self) -> None:
        """Every live remote rank's stacks into ranks/rank{r}.stack.txt (the post-mortem
        copies them from there, as it does the local ones)."""
        n = int(self.store.add("cmd/stacks", 1))
        want = {p.rank for p in self.remote if p.exitcode is None}
        deadline = time.time() + STACK_WAIT_S
        while want and time.time() < deadline:
            for r in list(want):
                if has(self.store, f"stack/{r}"):
                    head, _, text = get_text(self.store, f"stack/{r}").partition("\n")
                    if int(head) >= n:
                        path = os.path.join(self.run_dir, "ranks", f"rank{r}.stack.txt")
                        with open(path, "w") as f:
                            f.write(text)
                        want.discard(r)
            time.sleep(SYNC_S)

    def finish(self) -> None:
        try:
            self.store.set("cmd/finish", "1")
        except Exception:  # noqa: BLE001 - nothing left to tell
            pass

    def close(self) -> None:
        self.finish()
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(2.0)
