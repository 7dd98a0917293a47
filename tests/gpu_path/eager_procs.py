"""Worker for the NCCL flush-semantics test (spawned processes import this module by name).

`EagerGloo` is gloo with NCCL's send semantics: a payload isend's wait() returns at once
(NCCL's `work.wait()` only orders the stream), so only the channels can restore the
rendezvous. The real gloo works are kept and completed at the end.
"""

from __future__ import annotations

import json
import time

import torch

from ppx.core import Kind, Message
from ppx.engine.board import Board, F, RankBoard, State
from ppx.engine.channels import Channels
from ppx.engine.transport.gloo import GlooTransport

MARK = F.TOKENS  # rank 0 sets it on the board when its flush returned


class _Done:
    def wait(self) -> None:
        pass


class EagerGloo(GlooTransport):
    def __init__(self, rank: int, world: int, port: int, rendezvous_sends: bool) -> None:
        super().__init__(rank, world, port)
        self.rendezvous_sends = rendezvous_sends
        self.works: list = []

    def isend(self, dst: int, tag: int, tensor: torch.Tensor):
        work = super().isend(dst, tag, tensor)
        if tag == 0:  # headers stay on gloo under nccl too
            return work
        self.works.append(work)
        return _Done()


class SlowTaker(Channels):
    """A consumer that reads the header at once but takes the payload only once rank 0's
    flush returned (or after `hold_s`): the window between the two is where a flush that
    trusts eager sends returns early, so the red arm's reading is not a race."""

    def __init__(self, *args, hold_s: float, **kw) -> None:
        super().__init__(*args, **kw)
        self.hold_s = hold_s

    def _pull(self, src, msg, metas):
        deadline = time.time() + self.hold_s
        while int(self.board.board.fields(0)[MARK]) == 0 and time.time() < deadline:
            time.sleep(0.01)
        return super()._pull(src, msg, metas)


def flush_worker(
    rank, world, port, board_path, out_path, rendezvous_sends: bool, peer_wait_s: float
):
    torch.set_num_threads(1)
    board = RankBoard(Board(board_path, world), rank)
    t = EagerGloo(rank, world, port, rendezvous_sends)
    if rank == 0:
        ch = Channels(rank, world, t, board)
        ch.send(1, Message(Kind.PROXY, slot=0, pass_id=3, tensors=[torch.ones(2, 4)]))
        ch.flush([Kind.PROXY], pass_id=3)
        result = {"peer_consumed_at_flush_return": board.peer_consumed(1, Kind.PROXY)}
        board.set(MARK, 1)
        for w in t.works:
            w.wait()
    else:
        ch = SlowTaker(rank, world, t, board, hold_s=peer_wait_s)  # 3 s green, 60 s red
        msg = ch.recv(0, Kind.PROXY, slot=0, pass_id=3)
        result = {"shape": list(msg.tensors[0].shape)}
    with open(out_path % rank, "w") as f:
        json.dump(result, f)
    board.set(F.STATE, State.DONE)
    t.barrier()
    t.close()
