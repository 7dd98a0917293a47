"""The simulated wire models gloo exactly: rendezvous isends, FIFO per pair and tag,
collectives as barriers, virtual time, exact deadlock detection, and the channels (the real
engine code) on top of it."""

from __future__ import annotations

import torch

from ppx.core import Kind, Message
from ppx.engine.board import Board, RankBoard
from ppx.engine.channels import Channels
from ppx.engine.transport.sim import SimTransport, SimWire
from ppx.sim.scheduler import Scheduler
from ppx.sim.strategy import PctStrategy, RandomStrategy, Strategy


def world(n: int, seed: int = 0, strategy=None):
    sched = Scheduler(strategy or RandomStrategy(seed), 1e-3, 100_000, 1e6)
    wire = SimWire(sched, n)
    return sched, [SimTransport(wire, r) for r in range(n)]


def test_an_unmatched_isend_never_completes():
    sched, (t0, t1) = world(2)
    seen = []

    def sender():
        h = t0.isend(1, 0, torch.tensor([1]))
        seen.append("posted")
        h.wait()  # nobody receives: a rendezvous never completes
        seen.append("completed")

    sched.spawn("rank0", sender)
    sched.spawn("rank1", lambda: None)
    assert sched.run() == "deadlock"
    assert seen == ["posted"]
    assert "wait isend to rank1" in sched.blocked()[0]
    sched.close()


def test_the_isend_completes_when_the_peer_takes_it():
    sched, (t0, t1) = world(2)
    got = []

    def sender():
        t0.isend(1, 0, torch.tensor([7])).wait()
        got.append("done")

    sched.spawn("rank0", sender)
    sched.spawn("rank1", lambda: got.append(int(t1.recv(0, 0, torch.zeros(1, dtype=torch.int64)))))
    assert sched.run() == "done"
    assert sorted(map(str, got)) == ["7", "done"]


def test_fifo_per_pair_and_tag():
    sched, (t0, t1) = world(2, seed=3)
    got = {1: [], 2: []}

    def sender():
        hs = [t0.isend(1, 1 + i % 2, torch.tensor([i])) for i in range(8)]
        for h in hs:
            h.wait()

    def receiver():
        for tag in (2, 1, 2, 1, 1, 2, 1, 2):  # another order across tags, FIFO within one
            got[tag].append(int(t1.recv(0, tag, torch.zeros(1, dtype=torch.int64))))

    sched.spawn("rank0", sender)
    sched.spawn("rank1", receiver)
    assert sched.run() == "done"
    assert got == {1: [0, 2, 4, 6], 2: [1, 3, 5, 7]}


def test_collectives_are_barriers_with_rank_ordered_results():
    sched, ts = world(3, strategy=PctStrategy(1, 2, 3, 50))
    out = {}

    def member(r):
        def go():
            x = torch.tensor([float(r + 1)])
            ts[r].all_reduce(x)
            b = torch.tensor([r * 10])
            ts[r].broadcast(b, src=2)
            g = ts[r].all_gather(torch.tensor([r]))
            ts[r].barrier()
            out[r] = (float(x), int(b), [int(v) for v in g])

        return go

    for r in range(3):
        sched.spawn(f"rank{r}", member(r))
    assert sched.run() == "done"
    assert out == {r: (6.0, 20, [0, 1, 2]) for r in range(3)}


def test_a_collective_with_a_missing_member_is_a_deadlock():
    sched, ts = world(2)
    sched.spawn("rank0", lambda: ts[0].all_reduce(torch.ones(1)))
    sched.spawn("rank1", lambda: None)
    assert sched.run() == "deadlock"
    assert "all_reduce" in sched.blocked()[0]
    sched.close()


def test_virtual_time_sleeps_jump_and_kills_land_on_time():
    sched, (t0, t1) = world(2)
    woke = []

    def sleeper():
        t0.sleep(5.0)
        woke.append(t0.now())

    sched.spawn("rank0", sleeper)
    sched.spawn("rank1", lambda: t1.recv(0, 0, torch.zeros(1)))  # rank0 never sends
    sched.kill_at(1, 2.0)
    assert sched.run() == "done"  # rank0 woke and finished; rank1 died parked at t=2
    assert woke and 5.0 <= woke[0] < 5.01  # no wall-clock sleep: the clock jumped
    assert sched.tasks[1].killed and not sched.tasks[1].done
    sched.close()


def channels(n: int, seed: int):
    sched, ts = world(n, seed)
    board = Board(None, n)
    return sched, [Channels(r, n, ts[r], RankBoard(board, r)) for r in range(n)], board


def test_a_flush_of_an_unconsumed_payload_blocks_even_when_the_header_was_read():
    """The engine's rendezvous: a payload is pulled by the consumer of its kind only, so a
    peer that merely stashed the header does not complete the sender's flush."""
    sched, (c0, c1), board = channels(2, 0)
    log = []

    def rank0():
        c0.send(1, Message(Kind.LAP, tensors=[torch.tensor([1, 2])]))
        c0.send(1, Message(Kind.CHAIN))
        c0.flush([Kind.LAP])
        log.append("lap flushed")

    def rank1():
        c1.recv(0, Kind.CHAIN)  # reads and stashes the LAP header, pulls no payload
        log.append(f"chain; stashed={len(c1.inbox[(0, int(Kind.LAP))])}")
        c1.recv(0, Kind.DECISION)  # never sent: rank1 parks here

    sched.spawn("rank0", rank0)
    sched.spawn("rank1", rank1)
    assert sched.run() == "deadlock"
    assert log == ["chain; stashed=1"]
    rec = board.blocked_on(0)
    assert (rec["op"], rec["kind"], rec["peer"]) == ("flush", "lap", 1)
    sched.close()


def test_same_seed_same_run_other_seed_other_interleaving():
    def trace(seed):
        sched, chs, _ = channels(3, seed)
        order = []

        def rank(r):
            def go():
                for i in range(5):
                    chs[r].send((r + 1) % 3, Message(Kind.CHAIN, pass_id=i))
                    m = chs[r].recv((r - 1) % 3, Kind.CHAIN)
                    order.append((r, m.pass_id))
                chs[r].flush()

            return go

        for r in range(3):
            sched.spawn(f"rank{r}", rank(r))
        assert sched.run() == "done"
        return order, sched.choices

    a, b, c = trace(1), trace(1), trace(2)
    assert a == b
    assert a[1] != c[1]  # another seed chose differently


class Scripted(Strategy):
    """Chooses the listed tasks at the first choice points, then always the highest tid."""

    def __init__(self, first: list[int]) -> None:
        self.first = first

    def choose(self, ready: list[int], point: int, sched) -> int:
        return self.first[point] if point < len(self.first) else max(ready)


def test_an_isend_is_no_scheduling_point():
    """An isend never blocks, so the sender goes on to its next blocking operation in the
    same step: a strategy that would switch to the peer at once gets no chance to."""
    sched, (t0, t1) = world(2, strategy=Scripted([0]))
    log = []

    def sender():
        h = t0.isend(1, 0, torch.tensor([1]))
        log.append("rank0 after isend")
        h.wait()

    def receiver():
        log.append("rank1")
        t1.recv(0, 0, torch.zeros(1, dtype=torch.int64))

    sched.spawn("rank0", sender)
    sched.spawn("rank1", receiver)
    assert sched.run() == "done"
    assert log == ["rank0 after isend", "rank1"]
    assert len(sched.choices) == 1  # only the start: both could run


def test_readiness_is_one_wait_on_the_condition_not_a_poll():
    """rank 1 waits (readiness contract) for a header rank 0 sends after 1 s of virtual time;
    the wait is one scheduling point, so it costs a few steps, not one per 0.5 ms poll."""
    sched, (c0, c1), _ = channels(2, 0)
    c1.readiness_budget_s = 5.0
    got = []

    def rank0():
        c0.t.sleep(1.0)
        c0.send(1, Message(Kind.CHAIN, pass_id=7))
        c0.flush()

    sched.spawn("rank0", rank0)
    sched.spawn("rank1", lambda: got.append(c1.recv(0, Kind.CHAIN).pass_id))
    assert sched.run() == "done"
    assert got == [7] and 1.0 <= sched.now < 1.1
    assert sched.steps < 12, sched.steps


def test_readiness_without_evidence_stops_at_its_budget():
    sched, (c0, c1), _ = channels(2, 0)
    c1.readiness_budget_s = 2.0
    errors = []

    def rank1():
        try:
            c1.recv(0, Kind.CHAIN)
        except Exception as e:  # noqa: BLE001 - the StopRun is what the test reads
            errors.append(str(e))

    sched.spawn("rank0", lambda: c0.t.sleep(10.0))
    sched.spawn("rank1", rank1)
    assert sched.run() == "done"
    assert errors and errors[0].startswith("readiness: rank1 waited 2.0s for chain")
    assert sched.steps < 12, sched.steps


def stamps_on(clock: str) -> list[float]:
    """rank 0 sends 20 messages rank 1 takes, then sleeps 0.5 s: its clock after each."""
    sched = Scheduler(RandomStrategy(0), 1e-3, 100_000, 1e6, clock)
    wire = SimWire(sched, 2)
    t0, t1 = SimTransport(wire, 0), SimTransport(wire, 1)
    stamps = []

    def ping():
        for i in range(20):
            t0.isend(1, 0, torch.tensor([i])).wait()
            stamps.append(t0.now())
        t0.sleep(0.5)
        stamps.append(t0.now())

    sched.spawn("rank0", ping)
    sched.spawn("rank1", lambda: [t1.recv(0, 0, torch.zeros(1)) for _ in range(20)])
    assert sched.run() == "done"
    return stamps


def test_the_idle_clock_moves_only_when_no_task_can_run():
    """explore.clock=idle: steps take no virtual time, sleeps still land on time; on the
    step clock (the red arm here) every step moves it."""
    idle, step = stamps_on("idle"), stamps_on("step")
    assert idle[:-1] == [0.0] * 20 and idle[-1] == 0.5
    assert step[19] > 0.02 and step[-1] > 0.52


def test_every_kind_counts_its_own_sequence_and_a_skipped_seq_stops():
    # each (peer, kind) wire numbers its messages; the receiver checks each against its own
    # count, so a message lost or doubled shifts every later one and is named at once
    from ppx.core import StopRun

    sched, (c0, c1), _ = channels(2, 0)
    got: list[tuple[int, int]] = []
    stopped: list[str] = []

    def rank0():
        for kind in Kind:
            for _ in range(2):
                c0.send(1, Message(kind))
        c0.seq_out[(1, int(Kind.OUTPUT))] += 1  # red: one output seq never sent
        c0.send(1, Message(Kind.OUTPUT))
        c0.flush()

    def rank1():
        for kind in Kind:
            got.extend((int(kind), c1.recv(0, kind).seq) for _ in range(2))
        try:
            c1.recv(0, Kind.OUTPUT)
        except StopRun as e:
            stopped.append(str(e))

    sched.spawn("rank0", rank0)
    sched.spawn("rank1", rank1)
    sched.run()
    sched.close()
    assert got == [(int(k), s) for k in Kind for s in (0, 1)]
    assert all(c1.seq_in[(0, int(k))] == 2 for k in Kind)
    assert stopped == [
        "channel mismatch: rank1 expects output seq=2 from rank0, which sent seq=3 (slot=-1 "
        "pass=-1)"
    ]
