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
    follows the isend (pytorch#108378). The transport therefore connects eagerly."""
    lazy = outcome("pp=2", "engine/ordering=decision_first", *NCCL, "sim.connect=lazy")
    assert lazy[0] == "wedged"
    assert outcome("pp=2", "engine/ordering=decision_first", *NCCL)[0] == "served"
