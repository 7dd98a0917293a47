"""Typed messages over a transport: kinds, the per-(src, kind) inbox stash, counters.

Wire format: a fixed int64 header on tag 0 (the control plane, read in FIFO order per pair)
and the payload tensors on tag 1 + kind (the data plane). The payload is posted *before* the
header so that whoever has read a header can always pull its payload; and it is pulled only
by the consumer of that kind, so a payload send completes when the peer consumes the message,
not when it merely stashes the header. That is the rendezvous the orderings are about: a
`flush` of a message with a payload waits for the peer to actually want it.

A transport without tags on its payload plane (nccl: one communicator per pair, matched by
issue order only) says `payload_with_header`: the payload is then received right after its
header, before the next header is read, so payloads leave the wire in the order they were
sent; the consumer still counts the message as consumed only when it takes it, and a flush on
such a transport waits for that count (`_await_taken`), so the rendezvous is unchanged.
"""

from __future__ import annotations

from collections import defaultdict, deque

import torch

from ppx.core import CHANNEL_MISMATCH, Kind, Message, StopRun
from ppx.engine.board import Op, RankBoard
from ppx.engine.proxy_turns import NeverPulled, NeverSent, ProxyTurns
from ppx.engine.transport.base import Transport
from ppx.header import MAX_AUX

MAX_TENSORS = 4
_META = 4  # dtype, d0, d1, d2 per tensor
HEADER_LEN = 8 + MAX_AUX + MAX_TENSORS * _META
_DTYPES = [torch.int64, torch.float32, torch.bfloat16, torch.float16, torch.int32]
_CODE = {d: i for i, d in enumerate(_DTYPES)}


def encode_header(msg: Message) -> list[int]:
    """The HEADER_LEN int64s of `msg`'s header, as one list: the transport makes it one tensor
    (a tensor per field cost ~2 us each, and every message of every pass has a header), or
    carries the list itself (the simulated wire: no tensor to build, copy and read back)."""
    if msg.num_tensors > MAX_TENSORS or len(msg.aux) > MAX_AUX:
        raise ValueError(f"message {msg.kind.label}: too many tensors or aux fields")
    h = [int(msg.kind), msg.slot, msg.pass_id, msg.epoch, msg.seq, int(msg.flags)]
    h += [msg.num_tensors, 0, *msg.aux] + [0] * (MAX_AUX - len(msg.aux))
    for t in msg.tensors:
        if t.dim() > 3:
            raise ValueError("payload tensors have at most 3 dims")
        h += [_CODE[t.dtype], *t.shape] + [-1] * (3 - t.dim())
    return h + [0] * (HEADER_LEN - len(h))


def decode_header(v: list[int]) -> tuple[Message, list[tuple[torch.dtype, list[int]]]]:
    kind, slot, pass_id, epoch, seq, flags, n = v[:7]
    msg = Message(Kind(kind), slot, pass_id, epoch, seq, flags, tuple(v[8 : 8 + MAX_AUX]))
    metas = []
    for i in range(n):
        code, *dims = v[8 + MAX_AUX + i * _META : 8 + MAX_AUX + (i + 1) * _META]
        metas.append((_DTYPES[code], [d for d in dims if d >= 0]))
    return msg, metas


class Pulled(list):
    """A stashed message's payload, already received with its header (payload_with_header)."""


def _rows(metas) -> int:
    """The first payload tensor's rows, from its header (or its payload, pulled with it)."""
    if not metas:
        return 0
    return int(metas[0].shape[0] if isinstance(metas, Pulled) else metas[0][1][0])


class Channels:
    """Per-rank endpoint. Sends are isends completed lazily by `flush`; receives block."""

    def __init__(
        self,
        rank: int,
        world: int,
        transport: Transport,
        board: RankBoard,
        device: str = "cpu",
        readiness_budget_s: float | None = None,
    ) -> None:
        self.rank, self.world, self.t, self.board, self.device = (
            rank,
            world,
            transport,
            board,
            device,
        )
        self.pending: dict[tuple[int, int], list] = defaultdict(list)  # (dst, kind) -> handles
        self.inbox: dict[tuple[int, int], deque] = defaultdict(deque)  # (src, kind) -> stashed
        # (src, kind) -> messages already pulled (counted consumed) and not yet used: the row
        # probe's held frame and the chain hop its hedge read ahead of its pass (#1180)
        self.held: dict[tuple[int, int], deque] = defaultdict(deque)
        self.seq_out: dict[tuple[int, int], int] = defaultdict(int)
        self.seq_in: dict[tuple[int, int], int] = defaultdict(int)
        # (dst, kind) -> seq of the last message sent with a payload (flush's rendezvous
        # target on a transport whose sends do not wait for the peer: nccl)
        self.payload_seq: dict[tuple[int, int], int] = {}
        # engine.readiness: how long a receive waits for evidence its message was sent
        self.readiness_budget_s = readiness_budget_s
        self.turns = ProxyTurns(rank)  # a proxy pulled in its own pass or never (proxy_turns)

    # -- send side -----------------------------------------------------------------------
    def send(self, dst: int, msg: Message) -> None:
        self.stamp(dst, msg)
        self.post(dst, msg)

    def stamp(self, dst: int, msg: Message) -> None:
        """Give `msg` the next seq of its (dst, kind) wire."""
        key = (dst, int(msg.kind))
        msg.seq = self.seq_out[key]
        self.seq_out[key] += 1

    def post(self, dst: int, msg: Message) -> None:
        """Put a stamped message on the wire (sends complete at `flush`)."""
        key = (dst, int(msg.kind))
        self.board.sent[dst, msg.kind] += 1
        if dst == self.rank:  # pp=1 loopback: the output ring wraps onto itself
            self.inbox[key].append((msg, None))
            return
        where = self.t.payload_device_for(dst, sending=True)
        # .to(device) parses the device string even when it moves nothing: skip it on the host
        host = where == "cpu"
        payload = [
            (t.detach() if host and t.is_cpu else t.detach().to(where)).contiguous()
            for t in msg.tensors
        ]
        for t in payload:  # payload before header: a read header always has its payload posted
            self.pending[key].append(self.t.isend(dst, 1 + int(msg.kind), t))
        if payload:
            self.payload_seq[key] = msg.seq
        # the header describes `msg.tensors`: the payload copies have their dtypes and shapes
        self.pending[key].append(self.t.send_header(dst, encode_header(msg)))

    def flush(self, kinds: list[Kind] | None = None, pass_id: int = -1) -> None:
        """Complete pending sends; under gloo this waits until the peer has taken them."""
        for (dst, kind), handles in list(self.pending.items()):
            if kinds is not None and kind not in kinds or not handles:
                continue
            since = self.board.block(
                Op.FLUSH, dst, kind, -1, pass_id, self.seq_out[(dst, kind)] - 1
            )
            for h in handles:
                h.wait()
            handles.clear()
            if not self.t.rendezvous_sends:
                self._await_taken(dst, kind)
            self.board.unblock(
                Op.FLUSH, dst, kind, -1, pass_id, self.seq_out[(dst, kind)] - 1, since
            )

    def _await_taken(self, dst: int, kind: int) -> None:
        """gloo's flush semantics on a transport without them: wait (under the flush's
        blocked-on record, so the watchdog names a wedge as on gloo) until `dst` has consumed
        the last message of `kind` that carried a payload -- what gloo's rendezvous waits for.
        Header-only messages complete when read, as on gloo (their header goes over gloo)."""
        seq = self.payload_seq.pop((dst, kind), None)
        if seq is None:
            return
        self.t.wait_for(
            lambda: self.board.peer_consumed(dst, kind) > seq,
            f"flush: rank{dst} to consume {Kind(kind).label} seq={seq}",
            poll_s=0.0002,
        )

    def _read_header(self, src: int) -> tuple[Message, list]:
        msg, metas = decode_header(self.t.recv_header(src, HEADER_LEN))
        if metas and self.t.payload_with_header:  # see the module docstring
            return msg, Pulled(self._recv_payload(src, msg, metas))
        return msg, metas

    def _recv_payload(self, src: int, msg: Message, metas) -> list[torch.Tensor]:
        got, where = [], self.t.payload_device_for(src, sending=False)
        for dtype, shape in metas:
            out = self.t.recv_new(src, 1 + int(msg.kind), dtype, shape, where)
            got.append(out if self.device == "cpu" else out.to(self.device))
        return got

    def _pull(self, src: int, msg: Message, metas) -> Message:
        want = self.seq_in[(src, int(msg.kind))]
        if msg.seq != want:  # a message lost or doubled on the way: every later one is shifted
            raise StopRun(
                f"{CHANNEL_MISMATCH}rank{self.rank} expects {msg.kind.label} seq={want} from "
                f"rank{src}, which sent seq={msg.seq} (slot={msg.slot} pass={msg.pass_id})"
            )
        if isinstance(metas, Pulled):
            msg.tensors.extend(metas)
        elif metas is not None:
            msg.tensors.extend(self._recv_payload(src, msg, metas))
        self.board.consumed[src, msg.kind] += 1
        self.seq_in[(src, int(msg.kind))] += 1
        return msg

    def recv(
        self, src: int, kind: Kind, slot: int = -1, pass_id: int = -1, width: int = -1
    ) -> Message:
        """Blocking FIFO receive of `kind` from `src`; other kinds met first are stashed."""
        if held := self.held[(src, int(kind))]:
            return held.popleft()
        turns = self.turns if kind == Kind.PROXY and pass_id >= 0 else None
        box = self.inbox[(src, int(kind))]
        if box:
            msg, metas = box.popleft()
            if turns is not None:
                turns.proxy_in(src, pass_id, msg, _rows(metas))
            return self._pull(src, msg, metas)
        if turns is not None:  # a later chain an earlier receive set aside: never sent
            turns.stashed_all(src, [(m, 0) for m, _ in self.inbox[(src, Kind.CHAIN)]], pass_id)
        seq = self.seq_in[(src, int(kind))]
        budget_s = self.readiness_budget_s
        if budget_s is not None:
            self._await_evidence(src, kind, slot, pass_id, seq, budget_s)
        since = self.board.block(Op.RECV, src, kind, slot, pass_id, seq, width)
        try:
            while True:
                msg, metas = self._read_header(src)
                if msg.kind == kind:
                    break
                self.inbox[(src, int(msg.kind))].append((msg, metas))
                if turns is not None or msg.kind == Kind.PROXY:
                    self.turns.stashed(src, msg, _rows(metas), pass_id if turns else None)
            if turns is not None:
                turns.proxy_in(src, pass_id, msg, _rows(metas))
        except (NeverSent, NeverPulled):  # a stop, not a wait: no blocked-on record is left
            self.board.unblock(Op.RECV, src, kind, slot, pass_id, seq, since)
            raise
        msg = self._pull(src, msg, metas)
        self.board.unblock(Op.RECV, src, kind, slot, pass_id, seq, since)
        return msg

    def proxy_turn(self, src: int, pass_id: int, pulls: bool) -> None:
        """This rank's launch step of `pass_id`: it pulls the pass's proxy from `src` now
        (`pulls`) or never; one already set aside is then never pulled."""
        self.turns.turn = pass_id
        if not pulls:
            held = [(m, _rows(x)) for m, x in self.inbox[(src, int(Kind.PROXY))]]
            self.turns.stashed_all(src, held, None)

    def _await_evidence(
        self, src: int, kind: Kind, slot: int, pass_id: int, seq: int, budget_s: float
    ) -> None:
        """The readiness contract: before a blocking receive, positive evidence that `src`
        posted it (its sent counter moved past what we consumed, or the inbox holds it) within
        `budget_s` (the readiness design's budget).
        Reads shared counters, never the gloo wire; an exhausted budget is a named stop
        instead of a silent forever-block."""
        if self.ready(src, kind):
            return
        since = self.board.block(Op.READY, src, kind, slot, pass_id, seq)
        deadline = self.t.now() + budget_s
        # one wait on the condition (the simulator's is one scheduling point, gloo's a poll)
        if not self.t.wait_for(
            lambda: self.ready(src, kind), f"ready {kind.label} from rank{src}", deadline
        ):
            raise StopRun(
                f"readiness: rank{self.rank} waited {budget_s}s for {kind.label} "
                f"seq={seq} (slot={slot} pass={pass_id}) from rank{src}: sent="
                f"{self.board.peer_sent(src, kind)} consumed={int(self.board.consumed[src, kind])}"
            )
        self.board.unblock(Op.READY, src, kind, slot, pass_id, seq, since)

    def try_recv(self, src: int, kind: Kind) -> Message | None:
        """Only looks in the inbox; never touches the wire (gloo cannot be polled)."""
        if held := self.held[(src, int(kind))]:
            return held.popleft()
        box = self.inbox[(src, int(kind))]
        if not box:
            return None
        msg, metas = box.popleft()
        return self._pull(src, msg, metas)

    def hold(self, src: int, msg: Message) -> None:
        """Keep a message this rank pulled but will use later (the next `recv` of its kind
        returns it first): pulling completes the sender's rendezvous, as a frame taken into
        the fork's typed inbox did, while this rank decides what to do with it."""
        self.held[(src, int(msg.kind))].append(msg)

    def ready(self, src: int, kind: Kind) -> bool:
        """Positive evidence that `src` has posted the next `kind` message to this rank."""
        if self.held[(src, int(kind))]:
            return True
        if self.inbox[(src, int(kind))]:
            return True
        return self.board.peer_sent(src, kind) > int(self.board.consumed[src, kind])
