"""NCCL's point-to-point rules on the simulated wire (sim.semantics=nccl), rule by rule.

Each rule has its red arm (the wedge or hang NCCL's documentation and maintainers describe)
beside a green arm, and the same program with the rule switched off (a `sim.*` knob), which
must NOT show the hang: that is the proof the test would fail without the rule. gloo's own
semantics (the send-side hang) are the last group. Transport-level programs, no engine.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ppx.engine.transport.sim import SimTransport, SimWire
from ppx.sim.scheduler import Scheduler
from ppx.sim.strategy import RandomStrategy

NCCL = dict(
    semantics="nccl",
    send_buffer_bytes=1 << 20,
    connect="eager",
    stream_order=True,
    independent_progress=False,
    grouped=True,
    communicators="forward",
)
BIG = 1 << 18  # float32 elements: 1 MiB, more than a zero buffer and as much as the default


def world(n: int = 2, seed: int = 0, board=None, **rules):
    """A scheduler and one transport per rank (`board`: where the plane's own waits write
    their blocked-on record, as in a SimSupervisor run)."""
    sched, wire = sim_wire(n, seed, board, **rules)
    return sched, [SimTransport(wire, r) for r in range(n)]


def sim_wire(n: int = 2, seed: int = 0, board=None, **rules) -> tuple[Scheduler, SimWire]:
    """The scheduler and the wire alone: a rank task opens its own transport (as in a run)."""
    sim = SimpleNamespace(**(NCCL | rules)) if rules.get("semantics", "nccl") == "nccl" else None
    sched = Scheduler(RandomStrategy(seed), 1e-3, 100_000, 1e6)
    return sched, SimWire(sched, n, sim, board)


def run(sched, *bodies) -> str:
    """Run the bodies as rank tasks; `sched.parked` keeps what each parked task waited for."""
    for r, body in enumerate(bodies):
        sched.spawn(f"rank{r}", body)
    end = sched.run()
    sched.parked = sched.blocked()
    sched.close()
    return end


# -- 1. a send may wait for its receive; one communicator runs in issue order ----------------
def both_send_first(t, peer: int, tag: int = 1, grouped: bool = False):
    """NVIDIA/nccl#479: each rank posts a send to the other, then receives from it, then
    completes its send -- how the channels work (sends posted first, waited at the flush)."""

    def body():
        out = torch.empty(BIG)
        if grouped:
            with t.group():
                h = t.isend(peer, tag, torch.ones(BIG))
                r = t.irecv(peer, tag, out)
            r.wait()
        else:
            h = t.isend(peer, tag, torch.ones(BIG))
            t.recv(peer, tag, out)
        h.wait()
        assert float(out[0]) == 1.0

    return body


@pytest.mark.parametrize(
    ("rules", "end"),
    [
        ({"send_buffer_bytes": 0, "communicators": "pair"}, "deadlock"),  # red: synchronous
        ({"send_buffer_bytes": BIG * 4, "communicators": "pair"}, "done"),  # the buffer holds it
        ({"semantics": "gloo"}, "done"),  # gloo: the recv is not held behind the posted send
        # the rule off: without issue order the receive is not held behind the send
        ({"send_buffer_bytes": 0, "communicators": "pair", "stream_order": False}, "done"),
    ],
)
def test_both_send_first_deadlocks_on_one_synchronous_communicator(rules, end):
    sched, (t0, t1) = world(**rules)
    got = run(sched, both_send_first(t0, 1), both_send_first(t1, 0))
    assert got == end, sched.parked
    if end == "deadlock":
        assert all("nccl recv from" in label for label in sched.parked.values())


def test_grouping_both_sides_runs_the_exchange_as_one_operation():
    sched, (t0, t1) = world(send_buffer_bytes=0, communicators="pair")
    assert (
        run(sched, both_send_first(t0, 1, grouped=True), both_send_first(t1, 0, grouped=True))
        == "done"
    )


def test_grouping_switched_off_leaves_the_grouped_exchange_deadlocked():
    sched, (t0, t1) = world(send_buffer_bytes=0, communicators="pair", grouped=False)
    end = run(sched, both_send_first(t0, 1, grouped=True), both_send_first(t1, 0, grouped=True))
    assert end == "deadlock"


def test_grouping_on_one_side_only_is_undefined_and_ends_the_run():
    sched, (t0, t1) = world(send_buffer_bytes=0, communicators="pair")
    end = run(sched, both_send_first(t0, 1, grouped=True), both_send_first(t1, 0))
    assert end == "failed"  # NVIDIA/nccl#1279: "it should be considered as undefined"


def test_the_forward_layout_keeps_the_reverse_direction_off_nccl():
    """ppx's layout: rank 1 -> rank 0 goes over gloo, so no pair waits in NCCL's issue order
    with sends both ways: the red program of the first test completes."""
    sched, (t0, t1) = world(send_buffer_bytes=0)
    assert t0.wire.nccl.carries(0, 1) and not t0.wire.nccl.carries(1, 0)
    assert run(sched, both_send_first(t0, 1), both_send_first(t1, 0)) == "done"


# -- 2. point-to-point connections are made lazily, at the pair's first call -----------------
def unmatched_first_isend(t, seen: list):
    def body():
        t.isend(1, 1, torch.ones(4))
        seen.append("isend returned")  # the engine posts the header only after this

    return body


@pytest.mark.parametrize(("connect", "returned"), [("lazy", False), ("eager", True)])
def test_an_unmatched_first_isend_hangs_under_lazy_connection_only(connect, returned):
    """pytorch#108378 / NVIDIA/nccl#783: the pair's communicator is created inside the first
    call and waits for the peer's; rank 1 never calls (it waits for a header first)."""
    sched, (t0, t1) = world(connect=connect)
    seen: list = []
    end = run(sched, unmatched_first_isend(t0, seen), lambda: None)
    assert (seen == ["isend returned"]) is returned
    assert end == ("done" if returned else "deadlock")
    if not returned:
        assert "nccl connect rank0<->rank1 (lazy" in sched.parked[0]


def test_gloo_never_hangs_in_the_isend_itself():
    sched, (t0, _) = world(semantics="gloo")
    seen: list = []
    assert run(sched, unmatched_first_isend(t0, seen), lambda: None) == "done"
    assert seen == ["isend returned"]


# -- 3. two communicators are not promised to progress independently -------------------------
def out_of_order(t0, t1):
    """rank 0 sends on tag 1 then tag 2; rank 1 takes tag 2 first (one communicator per kind,
    consumed out of order across kinds: the pattern of ppx's transport before issue #24)."""

    def sender():
        t0.isend(1, 1, torch.ones(BIG))
        t0.isend(1, 2, torch.ones(BIG))

    def receiver():
        t1.recv(0, 2, torch.empty(BIG))
        t1.recv(0, 1, torch.empty(BIG))

    return sender, receiver


@pytest.mark.parametrize(("independent", "end"), [(False, "deadlock"), (True, "done")])
def test_out_of_order_use_of_two_communicators_wedges_without_independent_progress(
    independent, end
):
    sched, (t0, t1) = world(
        send_buffer_bytes=0, communicators="kind", independent_progress=independent
    )
    assert run(sched, *out_of_order(t0, t1)) == end
    if end == "deadlock":  # rank 0's send on tag 2 is held behind its send on tag 1
        assert "nccl recv from rank0 tag 2" in sched.parked[1]


def test_out_of_order_on_one_tagless_communicator_is_a_named_error():
    """One communicator per pair has no tags (pytorch#94819): taking tag 2 first would read
    tag 1's payload. The sim ends the run naming it instead of handing over wrong bytes."""
    sched, (t0, t1) = world(communicators="pair")
    assert run(sched, *out_of_order(t0, t1)) == "failed"


# -- 4. gloo hangs at the send, NCCL at the receive (NVIDIA/nccl#1456) ------------------------
@pytest.mark.parametrize(("semantics", "where"), [("gloo", "wait isend"), ("nccl", "nccl recv")])
def test_gloo_hangs_at_the_send_where_nccl_hangs_at_the_receive(semantics, where):
    """rank 0 sends, waits for its send, then receives what nobody sends; rank 1 never takes
    the send (it waits for a header that never comes). gloo's rendezvous parks rank 0 in the
    send's wait(); NCCL's wait() only orders streams, so rank 0 parks in the receive."""
    sched, (t0, t1) = world(semantics=semantics, communicators="pair")

    def rank0():
        t0.isend(1, 1, torch.ones(BIG)).wait()
        t0.recv(1, 2, torch.empty(BIG))

    end = run(sched, rank0, lambda: t1.recv(0, 0, torch.empty(4, dtype=torch.int64)))
    assert end == "deadlock"
    assert where in sched.parked[0], sched.parked
