"""The output ring's two historical switches: who relays a void, and who expects an output.

`engine.ordering.void_relay` -- where the verdict of a voided pass travels:
  ring (default)     the last rank sends a void output to rank 0 and every rank relays it on;
                     each rank re-queues at its own output receive, so a void is group-uniform.
  first_retracting   sgl-project#797's `pp_void_forward_payload`: the retracting rank and every
                     rank after it void their own batch the moment they learn of it (residents
                     stay in the slot), and the relay stops before the first retracting rank,
                     on the argument that from there on the slot is empty.
  downstream         sgl-project#1071's `_pp_void_retracted_pass` once #969 CUT V had deleted
                     the void output: the follower's verdict travels down the proxy only, the
                     last rank sends nothing, and rank 0 still waits for the slot's output.
`engine.ordering.output_recv` -- what an intermediate hop's output receive asks:
  relayed (default)  the batch this rank holds in flight for the slot, i.e. exactly what its
                     upstream relays (the same batch on every rank, or none after a local void).
  occupancy          sgl-project#802's `_do_recv`: this rank's own slot state, resident decode
                     requests included, while the upstream forwards only what it received.
                     After a first_retracting void of a slot with residents the hop waits for
                     an output nobody owes: the ring wedges through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.core import Flag, Message

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from ppx.engine.scheduler import Scheduler

VOID_RELAYS = ("ring", "first_retracting", "downstream")
OUTPUT_RECVS = ("relayed", "occupancy")


def validate_ring(merged: DictConfig) -> None:
    """Raises ValueError naming the first ring switch that cannot mean anything here."""
    o, a = merged.engine.ordering, merged.engine.admission
    if o.void_relay not in VOID_RELAYS:
        raise ValueError(f"engine.ordering.void_relay={o.void_relay!r}: {' | '.join(VOID_RELAYS)}")
    if o.output_recv not in OUTPUT_RECVS:
        raise ValueError(
            f"engine.ordering.output_recv={o.output_recv!r}: {' | '.join(OUTPUT_RECVS)}"
        )
    if o.output_recv == "occupancy" and merged.pp < 3:
        raise ValueError(
            f"engine.ordering.output_recv=occupancy needs an intermediate hop (pp >= 3): at "
            f"pp={merged.pp} every output receive is rank 0's or the last rank's"
        )
    voids = a.name == "decision" or (a.name == "forwarded" and a.on_refusal == "void")
    if o.void_relay != "ring" and (not voids or merged.pp < 2):
        raise ValueError(
            f"engine.ordering.void_relay={o.void_relay} needs a pipeline that voids passes "
            f"(engine/admission=decision, or forwarded with on_refusal=void, pp >= 2); "
            f"engine/admission={a.name} at pp={merged.pp} never voids one"
        )


def first_retracting(msg: Message) -> int:
    """The smallest rank that reported a retraction in a void output (obs rows start with it)."""
    obs = msg.tensors[1].tolist() if len(msg.tensors) > 1 else []
    return min((int(row[0]) for row in obs), default=0)


def relays(void_relay: str, msg: Message, nxt_rank: int) -> bool:
    """Does this rank relay `msg` to `nxt_rank`? A void under first_retracting stops before
    the first retracting rank (it and its successors emptied the slot themselves)."""
    if void_relay == "ring" or not msg.flags & Flag.VOID:
        return True
    return nxt_rank < first_retracting(msg)


def owes_resident_output(sched: Scheduler, slot: int, middle: bool, output_recv: str) -> bool:
    """With no batch in flight for `slot`: does this rank still expect its output? Only the
    #802 design does, on an intermediate hop, when resident decode requests hold the slot."""
    return output_recv == "occupancy" and middle and bool(sched.running[slot])
