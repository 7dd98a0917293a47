"""Faults on a rank's wire (hook `Wire`; channels.py wraps the rank's `send` with them):

- `faults.drop_void_output`: the last rank sends no void output (the pre-#797 bug: rank 0's
  output receive is never matched);
- `faults.corrupt`: the token sampled for request `rid` at output `position` leaves the last
  rank as a different id. Every rank then applies the same wrong token, so the run stays
  internally consistent and only the oracle can tell;
- `faults.lose`: message number `seq` of one kind is counted as sent but never posted; the
  receiver meets the next seq and the run ends `mismatch` (the channel seq check);
- `faults.delay`: a slow link, the sender held before every send of one kind (a virtual
  wait in the simulator, whose length the explorer may draw: `timed`).
"""

from __future__ import annotations

from typing import Any

from ppx.core import Flag, Kind, Message
from ppx.engine.faults.base import Fault, OneRank, Sender, Wire
from ppx.fault_sections import LAST_RANK, OFF

EVERY_RANK = LAST_RANK  # faults.delay.rank=-2: every rank's sends of the kind are slow


class OnKind(Fault):
    """A fault on one message kind (`kind`, None: off) of the rank its section names."""

    def __init__(self, section: Any, cfg: Any, rank: int) -> None:
        super().__init__(section, cfg, rank)
        self.kind = Kind[str(section.kind).upper()] if section.kind else None

    @classmethod
    def on(cls, section: Any) -> bool:
        return bool(section.kind)

    def here(self) -> bool:
        return int(self.section.rank) == self.rank

    @classmethod
    def refuse(cls, section: Any, cfg: Any) -> str | None:
        kind, rank, key = section.kind, int(section.rank), f"faults.{cls.key}"
        if kind is not None and str(kind).upper() not in Kind.__members__:
            return f"{key}.kind={kind!r}: {' | '.join(k.label for k in Kind)}"
        # half a fault acts on nothing: a run that names a kind on no rank (or a rank with no
        # kind) would be reported as faulted while every message went through untouched
        if kind is not None and rank == OFF:
            return f"{key}.kind={kind} names no rank ({key}.rank=-1 is off): set {key}.rank"
        if kind is None and rank != OFF:
            return f"{key}.rank={rank} names no message kind: set {key}.kind"
        return None


class DropVoidOutput(Fault, Wire):
    key = "drop_void_output"

    @classmethod
    def on(cls, section: Any) -> bool:
        return bool(section.enabled)

    def here(self) -> bool:
        return self.rank == self.world - 1

    def outgoing(self, ch: Sender, dst: int, msg: Message) -> Message | None:
        if msg.kind == Kind.OUTPUT and dst == 0 and msg.flags & Flag.VOID:
            return None  # never sent, never counted: rank 0's receive is never matched
        return msg


class Corrupt(OneRank, Wire):
    key = "corrupt"

    def here(self) -> bool:
        last = self.rank == self.world - 1
        return last and int(self.section.rank) in (self.rank, LAST_RANK)

    @classmethod
    def refuse(cls, section: Any, cfg: Any) -> str | None:
        rank, pp = int(section.rank), int(cfg.pp)
        if rank >= 0 and rank != pp - 1 or rank < LAST_RANK:
            return (
                f"faults.corrupt.rank={rank}: tokens are sampled on the last rank "
                f"({pp - 1}, or -2 for whichever is last; -1 = off)"
            )
        return None

    def outgoing(self, ch: Sender, dst: int, msg: Message) -> Message | None:
        if msg.kind != Kind.OUTPUT or dst != 0 or msg.flags & Flag.VOID:
            return msg
        # the last rank's own output for its batch of this slot, with the one token off
        sched = ch.sched_of()
        batch = sched.inflight[msg.slot]
        assert batch is not None, "send() asks only for its own output"
        rid, position = int(self.section.rid), int(self.section.position)
        finals = [e for e in batch.entries if e.final]
        tokens = msg.tensors[0]
        for i, e in enumerate(finals):
            if e.rid == rid and len(sched.reqs[e.rid].output) == position:
                tokens = tokens.clone()  # the model's own output tensor stays as it was
                tokens[i] = (int(tokens[i]) + 1) % int(self.cfg.model.vocab)
        msg.tensors = [tokens, *msg.tensors[1:]]
        return msg


class Lose(OnKind, Wire):
    key = "lose"

    def posting(self, ch: Sender, dst: int, msg: Message) -> bool:
        # message number `seq` of the kind is counted, never posted
        return msg.kind != self.kind or msg.seq != int(self.section.seq)


class Delay(OnKind, Wire):
    key = "delay"

    def here(self) -> bool:
        return int(self.section.rank) in (self.rank, EVERY_RANK)

    def posting(self, ch: Sender, dst: int, msg: Message) -> bool:
        if msg.kind == self.kind:
            ch.t.hold(float(self.section.s), "faults.delay")  # a slow link (base.py: timed)
        return True
