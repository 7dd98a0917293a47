"""Channels over real gloo processes: inbox stash, try_recv, counters, blocked-on record,
and a wrong send/recv order that really wedges (red) beside the right one (green)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time

import gloo_procs

from ppx.engine.board import Board
from ppx.supervisor import free_port
from ppx.watch.waitfor import cycle_text, find_cycle, graph
from ppx.watch.watchdog import Watchdog

DEADLINE_S = 30


CTX = mp.get_context("spawn")


def _spawn(fn, world, tmp_path, *extra):
    board_path = str(tmp_path / "board.bin")
    board = Board(board_path, world, create=True)
    out = str(tmp_path / "out%d.json")
    ctx = CTX
    port = free_port()
    procs = [
        ctx.Process(target=fn, args=(r, world, port, board_path, out, *extra), daemon=True)
        for r in range(world)
    ]
    for p in procs:
        p.start()
    return procs, board, out


def _join(procs, timeout=DEADLINE_S):
    deadline = time.time() + timeout
    for p in procs:
        p.join(max(0.1, deadline - time.time()))
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.kill()
        p.join()
    return alive


def test_inbox_stash_try_recv_and_counters(tmp_path):
    procs, _, out = _spawn(gloo_procs.stash_worker, 2, tmp_path)
    assert _join(procs) == []
    r1 = json.load(open(out % 1))
    assert r1["before"] is True  # try_recv on an empty inbox returns at once
    assert r1["chain_pass"] == 8
    assert r1["stashed"] == 1 and r1["ready"] is True
    assert r1["lap"] == [5, 6] and r1["lap_slot"] == 1
    assert (r1["consumed_before"], r1["consumed_after"]) == (0, 1)
    assert r1["again"] is True
    assert json.load(open(out % 0))["sent_lap"] == 1


def test_blocked_on_record_is_visible_while_blocked(tmp_path):
    go = CTX.Event()
    procs, board, out = _spawn(gloo_procs.blocked_worker, 2, tmp_path, go)
    seen = None
    deadline = time.time() + DEADLINE_S
    while time.time() < deadline and seen is None:
        rec = board.blocked_on(1)
        if rec is not None and rec["op"] == "recv":
            seen = rec
        time.sleep(0.02)
    go.set()  # rank 0 sends only now: the record could not have been missed
    assert _join(procs) == []
    assert seen is not None, "rank 1 never showed a blocked-on record"
    assert (seen["peer"], seen["kind"], seen["slot"], seen["pass_id"], seen["width"]) == (
        0,
        "proxy",
        2,
        5,
        3,
    )
    assert board.blocked_on(1) is None  # cleared after the receive completed
    assert json.load(open(out % 1))["shape"] == [3, 4]


def _watch(procs, board, stall_s, limit=DEADLINE_S):
    wd = Watchdog(board, procs, stall_s)
    t0 = time.time()
    while time.time() - t0 < limit:
        if all(p.exitcode is not None for p in procs):
            return "finished", time.time() - t0
        v = wd.check((), outstanding=True)
        if v:
            return v, time.time() - t0
        time.sleep(0.05)
    return "timeout", time.time() - t0


def test_wrong_order_wedges_and_watchdog_names_cycle(tmp_path):
    procs, board, _ = _spawn(gloo_procs.order_worker, 2, tmp_path, True)
    verdict, _ = _watch(procs, board, stall_s=1.5)
    recs = [board.blocked_on(r) for r in range(2)]
    _join(procs, timeout=0.1)
    assert verdict == "wedged"
    # a wedge is both ranks blocked for the whole stall window, never less
    assert all(r["since_s"] >= 1.5 for r in recs)
    text = cycle_text(find_cycle(graph(recs)))
    assert text in (
        "rank0 -[flush chain]-> rank1 -[recv decision]-> rank0",
        "rank1 -[recv decision]-> rank0 -[flush chain]-> rank1",
    )


def test_right_order_completes(tmp_path):
    procs, board, out = _spawn(gloo_procs.order_worker, 2, tmp_path, False)
    # a stall window as long as the deadline: a rank descheduled for a while on a loaded
    # machine cannot pass for a wedge; only finishing (or not) is measured
    verdict, _ = _watch(procs, board, stall_s=DEADLINE_S)
    assert _join(procs) == []
    assert verdict == "finished"
    assert all(os.path.exists(out % r) for r in range(2))
