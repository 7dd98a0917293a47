"""What torch's NCCL process group adds to NCCL's own rules, on the simulated wire
(sim.semantics=nccl): which communicator (= stream) an operation uses, when a communicator is
created, and a host that syncs with the device. Each rule: its red arm (the wedge), and the
same program with the rule switched off (a `sim.*` knob), which must not wedge.
Transport-level programs, no engine (the engine's arms: test_sim_nccl_engine.py)."""

from __future__ import annotations

import pytest
import torch
from test_sim_nccl import BIG, run, sim_wire, world

from ppx.core import Kind
from ppx.engine.board import Board, Op, RankBoard
from ppx.engine.transport.sim import SimTransport
from ppx.watch.waitfor import cycle_text, find_cycle, graph

HDR = torch.empty(4, dtype=torch.int64)  # a gloo header (tag 0)


def header(t, dst: int) -> None:
    t.isend(dst, 0, torch.zeros(4, dtype=torch.int64))


def cycle(board: Board) -> str | None:
    """The wait-for cycle the run's blocked-on records name (what cycle.txt says)."""
    return cycle_text(find_cycle(graph([board.blocked_on(r) for r in range(board.world)])))


def rank_record(board: Board, rank: int, op: Op, peer: int, kind: Kind) -> None:
    """The blocked-on record a rank's channel writes before its blocking call."""
    RankBoard(board, rank).block(op, peer, int(kind), 0, 0, 0)


# -- 1. plain isend/irecv: one stream per {low}:{high} key (pytorch#132852) -----------------
def send_then_recv(t, peer: int):
    def body():
        h = t.isend(peer, 1, torch.ones(BIG))
        t.recv(peer, 1, torch.empty(BIG))
        h.wait()

    return body


@pytest.mark.parametrize(("stream_order", "end"), [(True, "deadlock"), (False, "done")])
def test_a_send_to_a_peer_shares_its_stream_with_the_receive_from_it(stream_order, end):
    """On the default group (`world`), ranks 0 and 1 both send, then receive: the key
    `0:1` is one stream for both directions, so each receive waits behind its own send --
    even with streams progressing independently. Without issue order on a stream: done."""
    sched, (t0, t1) = world(
        send_buffer_bytes=0,
        communicators="world",
        independent_progress=True,
        stream_order=stream_order,
    )
    assert run(sched, send_then_recv(t0, 1), send_then_recv(t1, 0)) == end


def middle_rank_program(ts):
    """Rank 1 sends to rank 2, then receives from rank 0; rank 2 takes its payload only after
    a header rank 1 sends once its receive is done (ppx's chain: a hop waits on the last)."""
    t0, t1, t2 = ts

    def rank1():
        t1.isend(2, 1, torch.ones(BIG))
        t1.recv(0, 1, torch.empty(BIG))
        header(t1, 2)

    def rank2():
        t2.recv(1, 0, HDR)
        t2.recv(1, 1, torch.empty(BIG))

    return (lambda: t0.isend(1, 1, torch.ones(BIG))), rank1, rank2


@pytest.mark.parametrize(("api", "end"), [("send", "done"), ("batch", "deadlock")])
def test_batch_isend_irecv_puts_every_peer_on_one_stream(api, end):
    """pytorch#160342: batched P2P uses the group's device-keyed communicator, plain P2P a
    2-rank one per pair (#129140, #152220). With `batch` rank 1's receive from rank 0 waits
    behind its send to rank 2 on the one stream, though streams progress independently;
    with `send` the two keys are two streams and the receive runs beside the send."""
    sched, ts = world(
        3, send_buffer_bytes=0, communicators="world", independent_progress=True, p2p_api=api
    )
    assert run(sched, *middle_rank_program(ts)) == end
    if end == "deadlock":
        assert "behind its send to rank2" in sched.parked[1]


# -- 2. creation: lazy, by every member; in one order or in a circle -------------------------
@pytest.mark.parametrize(("api", "end"), [("send", "done"), ("batch", "deadlock")])
def test_a_lazy_batched_first_call_waits_for_every_rank_of_the_group(api, end):
    """pytorch#74701: the first batched call on a group creates its communicator and needs
    every rank of the group; a first plain call needs only its peer. Rank 0 sends to rank 1;
    rank 2 makes its first call only after a header rank 1 sends once it has received."""
    sched, (t0, t1, t2) = world(3, connect="lazy", communicators="world", p2p_api=api)

    def rank1():
        t1.recv(0, 1, torch.empty(4))
        header(t1, 2)
        t1.isend(2, 1, torch.ones(4))

    def rank2():
        t2.recv(1, 0, HDR)
        t2.recv(1, 1, torch.empty(4))

    assert run(sched, lambda: t0.isend(1, 1, torch.ones(4)), rank1, rank2) == end
    if end == "deadlock":
        assert "nccl connect rank0<->rank2" in sched.parked[0]


@pytest.mark.parametrize(
    ("rules", "end"),
    [
        ({"connect": "lazy", "connect_order": "next_first"}, "deadlock"),  # red: a circle
        ({"connect": "lazy", "connect_order": "global"}, "done"),  # one order: ppx's walk
        ({"connect": "eager"}, "done"),  # the rule off: created before anything runs
    ],
)
def test_a_start_up_walk_in_per_rank_orders_waits_in_a_circle(rules, end):
    """Three ranks, a communicator per neighbour pair and one for last -> first (a ring).
    Each rank opens its transport in its own task (as a rank does) and creates its
    communicators there, blocking at each until the peer reaches it: each rank its next
    neighbour first is a circle, the one global order (pairs.payload_pairs) is not. The
    waits are blocked-on records, so the cycle names them."""
    board = Board(None, 3)
    sched, wire = sim_wire(3, board=board, communicators="pair", **rules)
    assert run(sched, *[lambda r=r: SimTransport(wire, r) for r in range(3)]) == end
    if end == "deadlock":
        assert cycle(board) == (
            "rank0 -[connect any]-> rank1 -[connect any]-> rank2 -[connect any]-> rank0"
        )


def test_a_forward_chain_cannot_wait_in_a_circle_in_any_order():
    """ppx's layout (r -> r + 1 only) is a path: whatever order each rank walks it in, the
    last rank of the path has one communicator, so every walk ends."""
    sched, wire = sim_wire(4, connect="lazy", connect_order="next_first")
    assert run(sched, *[lambda r=r: SimTransport(wire, r) for r in range(4)]) == "done"


def test_a_lazy_first_payload_names_its_connect_wait_in_the_cycle():
    """The channels post a payload before its header: under first_use the payload isend
    creates the communicator and waits for rank 1, which waits for the header. The creation
    writes its own blocked-on record, so the wait-for graph has the cycle (it had none)."""
    board = Board(None, 2)
    sched, (t0, t1) = world(board=board, connect="lazy")

    def rank0():
        t0.isend(1, 1 + int(Kind.CHAIN), torch.ones(4))
        header(t0, 1)

    def rank1():
        rank_record(board, 1, Op.RECV, 0, Kind.CHAIN)
        t1.recv(0, 0, HDR)

    assert run(sched, rank0, rank1) == "deadlock"
    assert cycle(board) == "rank0 -[connect chain]-> rank1 -[recv chain slot=0]-> rank0"


# -- 3. a host that syncs with the device while a send spins ---------------------------------
@pytest.mark.parametrize(("sync", "end"), [("device", "deadlock"), ("none", "done")])
def test_a_host_sync_waits_for_a_send_whose_receiver_waits_for_this_host(sync, end):
    """rank 0 posts a payload, computes (torch.cuda.synchronize() under host_sync=device),
    then posts the header; rank 1 takes the payload after the header (ppx's channels). The
    synchronize waits for the send, the send for rank 1, rank 1 for the header."""
    sched, (t0, t1) = world(send_buffer_bytes=0, host_sync=sync)

    def rank0():
        t0.isend(1, 1, torch.ones(BIG))
        t0.host_sync()
        header(t0, 1)

    def rank1():
        t1.recv(0, 0, HDR)
        t1.recv(0, 1, torch.empty(BIG))

    assert run(sched, rank0, rank1) == end
    if end == "deadlock":
        assert "host sync (compute) behind nccl send to rank1" in sched.parked[0]


# -- 4. what the order rules already imply ---------------------------------------------------
def test_inside_a_group_a_later_send_to_the_same_peer_waits_for_the_earlier():
    """NCCL p2p docs: calls to one peer inside a group run in order. A small send grouped
    after a large one to the same peer does not complete into the buffer before it."""
    sched, (t0, _) = world(send_buffer_bytes=BIG)  # room for the small one, not the large

    sent = []

    def rank0():
        with t0.group():
            sent.append(t0.isend(1, 1, torch.ones(BIG * 2)).op)
            sent.append(t0.isend(1, 1, torch.ones(4)).op)

    assert run(sched, rank0, lambda: None) == "done"
    large, small = sent
    assert not large.done and not small.done


def test_a_send_past_the_free_buffer_completes_once_earlier_bytes_drain():
    """A message moves in chunks: what does not fit waits for room, not for its own
    receive -- once the earlier message is received, the second completes unreceived."""
    sched, (t0, t1) = world(send_buffer_bytes=BIG * 3 // 2 * 4)  # 1.5 messages
    sent = []

    def rank0():
        t0.isend(1, 1, torch.ones(BIG))
        sent.append(t0.isend(1, 1, torch.ones(BIG)).op)

    def rank1():
        t1.recv(0, 1, torch.empty(BIG))

    assert run(sched, rank0, rank1) == "done"
    assert sent[0].done and sent[0].buffered
