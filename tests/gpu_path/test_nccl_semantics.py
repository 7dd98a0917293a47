"""The NCCL transport's flush, checked on the CPU over real gloo processes.

NCCL's send `wait()` does not wait for the peer. Over real gloo processes whose payload sends
complete at once (NCCL's semantics, `eager_procs.EagerGloo`), a flush returns only after the
peer consumed the payload when the transport says `rendezvous_sends=False` (green, and the wait
shows as a `flush` blocked-on record the watchdog reads), and returns before the peer took
anything when it is treated as a rendezvous (red: the behaviour before the fix). The start-up
order and pairs are checked in test_nccl_pairs.py, NCCL's other rules in tests/sim.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import eager_procs  # noqa: E402

from ppx.core import Kind  # noqa: E402
from ppx.engine.board import Board  # noqa: E402
from ppx.engine.transport.nccl import NcclTransport  # noqa: E402
from ppx.supervisor import free_port  # noqa: E402


def test_nccl_transport_declares_non_rendezvous_sends() -> None:
    assert NcclTransport.rendezvous_sends is False
    assert NcclTransport.payload_with_header is True  # one tagless communicator per pair


def _flush_run(tmp_path, rendezvous_sends: bool) -> tuple[dict, list[dict]]:
    # The peer reads the header at once and takes the payload only after rank 0's flush
    # returned. Green (the flush waits for the payload's consumption): rank 0 sits in the
    # flush until the peer gives up holding after 3 s. Red (eager sends taken for
    # rendezvous): the flush returns after the header, the peer holds until rank 0 read the
    # counter. (Before, the peer took header and payload together after a fixed 3 s: the
    # red arm's reading raced the payload's consumption and failed one suite run in ~5.)
    peer_wait_s = 60.0 if rendezvous_sends else 3.0
    board_path = str(tmp_path / "board.bin")
    board = Board(board_path, 2, create=True)
    out = str(tmp_path / "out%d.json")
    ctx, port = mp.get_context("spawn"), free_port()
    procs = [
        ctx.Process(
            target=eager_procs.flush_worker,
            args=(r, 2, port, board_path, out, rendezvous_sends, peer_wait_s),
            daemon=True,
        )
        for r in range(2)
    ]
    for p in procs:
        p.start()
    seen = []
    deadline = time.time() + 60
    while any(p.is_alive() for p in procs) and time.time() < deadline:
        rec = board.blocked_on(0)
        if rec:
            seen.append(rec)
        time.sleep(0.02)
    for p in procs:
        p.join(1)
        if p.is_alive():
            p.kill()
            p.join()
    assert [p.exitcode for p in procs] == [0, 0]
    return json.load(open(out % 0)), seen


def test_flush_waits_for_the_peer_without_rendezvous_sends(tmp_path) -> None:
    res, seen = _flush_run(tmp_path, rendezvous_sends=False)
    assert res["peer_consumed_at_flush_return"] == 1
    assert any(
        r["op"] == "flush" and r["peer"] == 1 and r["kind"] == Kind.PROXY.label for r in seen
    )


def test_flush_returns_early_when_eager_sends_are_taken_for_rendezvous(tmp_path) -> None:
    res, _ = _flush_run(tmp_path, rendezvous_sends=True)
    assert res["peer_consumed_at_flush_return"] == 0
