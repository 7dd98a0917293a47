"""The engine (the real RankLoop, policies and channels) on the simulated wire with NCCL's
rules for payloads (sim.semantics=nccl): what `python -m ppx.study nccl_semantics` finds, on
one small cell each, in-process. Red arms (the wedges NCCL adds) beside their green arms."""

from __future__ import annotations

import pytest
from ppx_helpers import compose

from ppx.sim.world import SimSupervisor

CELL = ["+exp=micro_load", "logger=none", "engine/admission=decision"]
NCCL = ["sim.semantics=nccl"]
SYNC = [*NCCL, "sim.send_buffer_bytes=0"]


def outcome(*overrides: str) -> tuple[str, str]:
    sup = SimSupervisor(compose(*CELL, *overrides), None)
    out = sup.run()
    return out["verdict"], (out.get("postmortem") or {}).get("cycle") or ""


@pytest.mark.parametrize("wire", [["sim.semantics=gloo"], NCCL, SYNC])
def test_decision_first_at_pp2_serves_on_every_wire_with_the_forward_layout(wire):
    assert outcome("pp=2", "engine/ordering=decision_first", *wire)[0] == "served"


def test_a_communicator_carrying_both_directions_wedges_at_pp2_with_synchronous_sends():
    """The layout the issue first proposed (neighbours and last -> first, both ways): rank 1's
    output send to rank 0 and rank 0's next sends to rank 1 wait on one stream-ordered
    communicator (NVIDIA/nccl#479, through the ring). gloo serves the same cell."""
    verdict, cycle = outcome(
        "pp=2", "engine/ordering=decision_first", *SYNC, "sim.communicators=pair"
    )
    assert verdict == "wedged"
    assert cycle == "rank0 -[recv output slot=0]-> rank1 -[flush output]-> rank0"


@pytest.mark.parametrize(("independent", "verdict"), [("false", "wedged"), ("true", "served")])
def test_at_pp3_synchronous_sends_wedge_only_without_independent_progress(independent, verdict):
    """Rank 1's receive from rank 0 waits behind its own send to rank 2 when its two
    communicators run in issue order (NVIDIA/nccl#783: no promise they do not)."""
    got, cycle = outcome(
        "pp=3",
        "engine/ordering=decision_first",
        *SYNC,
        f"sim.independent_progress={independent}",
    )
    assert got == verdict
    if got == "wedged":  # the host-level cycle; the device-level hold is in rank 1's stack label
        assert "rank1 -[recv proxy" in cycle


def test_lazy_connection_hangs_the_first_payload_and_eager_does_not():
    """ProcessGroupNCCL without eager init: the first payload isend creates the pair's
    communicator and waits for rank 1, which posts its receive only after the header that
    follows the isend (pytorch#108378). The transport therefore connects eagerly. The
    creation's wait is a blocked-on record, so the post-mortem names the cycle."""
    lazy = outcome("pp=2", "engine/ordering=decision_first", *NCCL, "sim.connect=lazy")
    assert lazy == ("wedged", "rank0 -[connect chain]-> rank1 -[recv chain slot=0]-> rank0")
    assert outcome("pp=2", "engine/ordering=decision_first", *NCCL)[0] == "served"


RING = ["pp=3", "engine/ordering=decision_first", *NCCL, "sim.communicators=pair"]


@pytest.mark.parametrize(("order", "verdict"), [("global", "served"), ("next_first", "wedged")])
def test_a_lazy_start_up_walk_serves_in_one_order_and_wedges_in_per_rank_orders(order, verdict):
    """Lazy creation at start-up, before any payload (what ppx's transport does for a torch
    that creates P2P communicators lazily): in the one global order the ring of pp=3
    communicators serves; each rank its next neighbour first waits in a circle."""
    got, cycle = outcome(*RING, "sim.connect=lazy", f"sim.connect_order={order}")
    assert got == verdict
    if got == "wedged":
        assert cycle == "rank0 -[connect any]-> rank1 -[connect any]-> rank2 -[connect any]-> rank0"


@pytest.mark.parametrize(("api", "verdict"), [("send", "served"), ("batch", "wedged")])
def test_batched_p2p_on_the_default_group_wedges_at_pp3_where_plain_p2p_serves(api, verdict):
    """Every payload on the default group, synchronous sends, streams that progress
    independently: plain isend/irecv use one stream per pair and serve; batch_isend_irecv
    puts every peer on the device's one stream, so rank 1's proxy receive from rank 0
    waits behind its own send to rank 2 (pytorch#160342, #132852)."""
    got, cycle = outcome(
        "pp=3",
        "engine/ordering=decision_first",
        *SYNC,
        "sim.independent_progress=true",
        "sim.communicators=world",
        f"sim.p2p_api={api}",
    )
    assert got == verdict
    if got == "wedged":
        assert "rank1 -[recv proxy" in cycle


def test_a_host_sync_in_compute_wedges_pp2_on_synchronous_sends():
    """Rank 0 computes while its decision payload's send still spins for rank 1; a
    compute that syncs the host with the device (torch.cuda.synchronize) waits for it,
    and rank 1 waits in its lap flush for rank 0's host. The same cell without the sync
    serves (test_decision_first_at_pp2_serves_on_every_wire_with_the_forward_layout)."""
    got, cycle = outcome("pp=2", "engine/ordering=decision_first", *SYNC, "sim.host_sync=device")
    assert (got, cycle) == ("wedged", "rank0 -[compute decision]-> rank1 -[flush lap]-> rank0")
