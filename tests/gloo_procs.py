"""Worker functions for the real-gloo channel tests (spawned processes import this module)."""

from __future__ import annotations

import json

import torch

from ppx.core import Kind, Message
from ppx.engine.board import Board, F, RankBoard, State
from ppx.engine.channels import Channels
from ppx.engine.transport.gloo import GlooTransport


def _setup(rank, world, port, board_path):
    torch.set_num_threads(1)
    board = RankBoard(Board(board_path, world), rank)
    t = GlooTransport(rank, world, port)
    return Channels(rank, world, t, board), board


def stash_worker(rank, world, port, board_path, out_path):
    """rank 0 sends LAP then CHAIN; rank 1 receives CHAIN first (LAP is stashed)."""
    ch, _ = _setup(rank, world, port, board_path)
    if rank == 0:
        ch.send(1, Message(Kind.LAP, slot=1, pass_id=7, tensors=[torch.tensor([5, 6])]))
        ch.send(1, Message(Kind.CHAIN, slot=0, pass_id=8))  # header only
        ch.flush()
        result = {"sent_lap": int(ch.board.sent[1, Kind.LAP])}
    else:
        before = ch.try_recv(0, Kind.LAP)  # never touches the wire: nothing stashed yet
        chain = ch.recv(0, Kind.CHAIN)
        stashed = len(ch.inbox[(0, int(Kind.LAP))])
        ready = ch.ready(0, Kind.LAP)
        consumed_before = int(ch.board.consumed[0, Kind.LAP])
        lap = ch.try_recv(0, Kind.LAP)
        result = {
            "before": before is None,
            "chain_pass": chain.pass_id,
            "stashed": stashed,
            "ready": ready,
            "lap": lap.tensors[0].tolist(),
            "lap_slot": lap.slot,
            "consumed_before": consumed_before,
            "consumed_after": int(ch.board.consumed[0, Kind.LAP]),
            "again": ch.try_recv(0, Kind.LAP) is None,
        }
    with open(out_path % rank, "w") as f:
        json.dump(result, f)
    ch.board.set(F.STATE, State.DONE)  # a clean exit, not a dead peer
    ch.t.close()


def blocked_worker(rank, world, port, board_path, out_path, seen):
    """rank 1 blocks on PROXY; rank 0 sends only once the test has seen the record (`seen`,
    an event the test sets), so the record is there to see however slow the machine is."""
    ch, _ = _setup(rank, world, port, board_path)
    if rank == 0:
        if not seen.wait(60):
            raise TimeoutError("the test never saw rank 1's blocked-on record")
        ch.send(1, Message(Kind.PROXY, slot=2, pass_id=5, tensors=[torch.ones(3, 4)]))
        ch.flush()
    else:
        msg = ch.recv(0, Kind.PROXY, slot=2, pass_id=5, width=3)
        with open(out_path % rank, "w") as f:
            json.dump({"shape": list(msg.tensors[0].shape)}, f)
    ch.board.set(F.STATE, State.DONE)  # a clean exit, not a dead peer
    ch.t.close()


def order_worker(rank, world, port, board_path, out_path, wrong: bool):
    """rank 0: send CHAIN (with payload), flush it, then receive DECISION from rank 1.
    rank 1 wrong order: receive DECISION before CHAIN -> rank 0 in flush, rank 1 in recv: wedge.
    rank 1 right order: receive CHAIN, then send DECISION."""
    ch, _ = _setup(rank, world, port, board_path)
    if rank == 0:
        ch.send(1, Message(Kind.CHAIN, tensors=[torch.arange(4)]))
        ch.flush([Kind.CHAIN])
        ch.recv(1, Kind.DECISION)
    else:
        if wrong:
            ch.recv(0, Kind.DECISION)
            ch.recv(0, Kind.CHAIN)
        else:
            ch.recv(0, Kind.CHAIN)
            ch.send(0, Message(Kind.DECISION, tensors=[torch.zeros(1, dtype=torch.int64)]))
            ch.flush()
    with open(out_path % rank, "w") as f:
        json.dump({"done": True}, f)
    ch.board.set(F.STATE, State.DONE)  # a clean exit, not a dead peer
    ch.t.close()
