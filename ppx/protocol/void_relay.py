"""`engine.ordering.void_relay`: where the verdict of a voided pass travels.

- `ring` (default): the last rank sends a void output to rank 0 and every rank relays it on;
  each rank re-queues at its own output receive, so a void is group-uniform.
- `first_retracting`: sgl-project#797's `pp_void_forward_payload`: the retracting rank and every
  rank after it void their own batch the moment they learn of it (residents stay in the slot),
  and the relay stops before the first retracting rank, on the argument that from there on the
  slot is empty.
- `downstream`: sgl-project#1071's `_pp_void_retracted_pass` once #969 CUT V had deleted the
  void output: the follower's verdict travels down the proxy only, the last rank sends
  nothing, and rank 0 still waits for the slot's output (#1072 deleted the relay).
"""

from __future__ import annotations

from typing import Any

from ppx.core import Flag, Message
from ppx.protocol.axis import Axis, Variant
from ppx.protocol.refusal import voids

AXIS = Axis(
    "engine.ordering.void_relay",
    "void_relay",
    "where the verdict of a voided pass travels",
    default="ring",
)


def first_retracting(msg: Message) -> int:
    """The smallest rank that reported a retraction in a void output (obs rows start with it)."""
    obs = msg.tensors[1].tolist() if len(msg.tensors) > 1 else []
    return min((int(row[0]) for row in obs), default=0)


class VoidRelay(Variant):
    axis = AXIS
    voids_here = False  # a rank that learns of the void on the proxy empties the slot itself
    sends_void_output = True  # the last rank sends a void output to rank 0

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if cls is Ring or (voids(cfg) and int(cfg.pp) >= 2):
            return None
        return (
            f"{cls.switch()} needs a pipeline that voids passes (engine/admission=decision, or "
            f"forwarded with on_refusal=void, pp >= 2); engine/admission="
            f"{cfg.engine.admission.name} at pp={cfg.pp} never voids one"
        )

    def relays(self, msg: Message, nxt_rank: int) -> bool:
        """Does this rank relay the output `msg` on to `nxt_rank`?"""
        return True


class Ring(VoidRelay):
    name = "ring"
    ref = "sgl-project#797 (the void output), #791b"
    about = "a void output from the last rank, relayed round the ring"


class FirstRetracting(VoidRelay):
    name = "first_retracting"
    ref = "sgl-project#797 pp_void_forward_payload"
    about = "the retracting rank and its successors empty the slot; the relay stops before it"
    voids_here = True

    def relays(self, msg: Message, nxt_rank: int) -> bool:
        return not msg.flags & Flag.VOID or nxt_rank < first_retracting(msg)


class Downstream(VoidRelay):
    name = "downstream"
    ref = "sgl-project#1071 (after #969 CUT V), #1072"
    about = "the verdict travels down the proxy only; the last rank sends no output"
    voids_here = True
    sends_void_output = False
