"""`engine.ordering.output_recv`: what an intermediate hop's output receive asks for.

- `relayed` (default): the batch this rank holds in flight for the slot, i.e. exactly what its
  upstream relays (the same batch on every rank, or none after a local void).
- `occupancy`: sgl-project#802's `_do_recv`: this rank's own slot state, resident decode
  requests included, while the upstream forwards only what it received. After a
  `first_retracting` void of a slot with residents the hop waits for an output nobody owes:
  the ring wedges through it (specimen wedge_802f_1712).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppx.protocol.axis import Axis, Variant

if TYPE_CHECKING:
    from ppx.protocol.views import SchedulerView

AXIS = Axis(
    "engine.ordering.output_recv",
    "output_recv",
    "what an intermediate hop's output receive asks for",
    default="relayed",
)


class OutputRecv(Variant):
    axis = AXIS

    def owes_resident_output(self, sched: SchedulerView, slot: int, middle: bool) -> bool:
        """With no batch in flight for `slot`: does this rank still expect its output?"""
        return False


class Relayed(OutputRecv):
    name = "relayed"
    ref = "after sgl-project#802"
    about = "the batch in flight for the slot: what the upstream relays"


class Occupancy(OutputRecv):
    name = "occupancy"
    ref = "sgl-project#802 _do_recv"
    about = "the rank's own slot occupancy, resident decode requests included"

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        if int(cfg.pp) < 3:
            return (
                f"{cls.switch()} needs an intermediate hop (pp >= 3): at pp={cfg.pp} every "
                "output receive is rank 0's or the last rank's"
            )
        return None

    def owes_resident_output(self, sched: SchedulerView, slot: int, middle: bool) -> bool:
        return middle and bool(sched.running[slot])
