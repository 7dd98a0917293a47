"""Faults on a rank's wire: `Channels` with its `send` wrapped (ppx/engine/channels.py).

- `faults.delay_*`: a slow link, a sleep before every send of one kind (a virtual sleep in the
  simulator);
- `faults.lose_*`: message number `lose_seq` of one kind is counted as sent but never posted;
  the receiver meets the next seq and the run ends `mismatch` (the channel seq check);
- `faults.drop_void_output`: the last rank sends no void output (the pre-#797 bug: rank 0's
  output receive is never matched);
- `faults.corrupt_token`: the token sampled for request `corrupt_rid` at output position
  `corrupt_position` leaves the last rank as a different id. Every rank then applies the same
  wrong token, so the run stays internally consistent and only the oracle can tell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ppx.core import Flag, Kind, Message
from ppx.engine.channels import Channels

if TYPE_CHECKING:
    from ppx.config import FaultsCfg
    from ppx.engine.scheduler import Scheduler

LAST_RANK = -2  # faults.corrupt_rank=-2: whichever rank is last (pp - 1)
EVERY_RANK = -2  # faults.delay_rank=-2: every rank's sends of the kind are slow


class FaultyChannels(Channels):
    def __init__(
        self,
        *args,
        faults: FaultsCfg,
        vocab: int,
        sched_of: Callable[[], Scheduler],
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        f, last = faults, self.rank == self.world - 1
        self.delays: dict[int, float] = {}
        if f.delay_kind and f.delay_rank in (self.rank, EVERY_RANK):
            self.delays[Kind[f.delay_kind.upper()]] = float(f.delay_s)
        self.lose = (
            (int(Kind[f.lose_kind.upper()]), int(f.lose_seq))
            if f.lose_kind and f.lose_rank == self.rank
            else None
        )
        self.drop_void_output = bool(f.drop_void_output) and last
        self.corrupt = (
            (int(f.corrupt_rid), int(f.corrupt_position))
            if (f.corrupt_rank in (self.rank, LAST_RANK) and last)
            else None
        )
        self.vocab = vocab
        self.sched_of = sched_of  # () -> the rank's current scheduler (corrupt_token reads it)

    def send(self, dst: int, msg: Message) -> None:
        output = msg.kind == Kind.OUTPUT and dst == 0
        if output and self.drop_void_output and msg.flags & Flag.VOID:
            return  # never sent, never counted: rank 0's receive for the slot is never matched
        if output and self.corrupt is not None and not msg.flags & Flag.VOID:
            msg = self.corrupted(msg)
        self.stamp(dst, msg)
        if self.lose == (int(msg.kind), msg.seq):  # counted, never posted
            return
        if msg.kind in self.delays:  # a slow link (a virtual sleep in the simulator)
            self.t.sleep(self.delays[msg.kind])
        self.post(dst, msg)

    def corrupted(self, msg: Message) -> Message:
        """The last rank's own output for its batch of this slot, with the one token off."""
        sched, corrupt = self.sched_of(), self.corrupt
        batch = sched.inflight[msg.slot]
        assert batch is not None and corrupt is not None, "send() asks only for its own output"
        rid, position = corrupt
        finals = [e for e in batch.entries if e.final]
        tokens = msg.tensors[0]
        for i, e in enumerate(finals):
            if e.rid == rid and len(sched.reqs[e.rid].output) == position:
                tokens = tokens.clone()  # the model's own output tensor stays as it was
                tokens[i] = (int(tokens[i]) + 1) % self.vocab
        msg.tensors = [tokens, *msg.tensors[1:]]
        return msg


def channels_for(
    rank: int,
    world: int,
    t,
    board,
    device: str,
    cfg,
    readiness_budget_s: float | None,
    sched_of: Callable[[], Scheduler],
) -> Channels:
    """Plain channels, or channels with the configured faults wrapped around `send`.
    `sched_of`: the rank's current scheduler (a flip replaces it), asked when a fault needs it."""
    f = cfg.faults
    faulty = f.delay_kind or f.lose_kind or f.drop_void_output or f.corrupt_rank != -1
    args = (rank, world, t, board, device, readiness_budget_s)
    if not faulty:
        return Channels(*args)
    return FaultyChannels(*args, faults=f, vocab=int(cfg.model.vocab), sched_of=sched_of)
