"""The output ring's strategy: the two designs that decide how a slot's result gets back.

`relay` (engine.ordering.void_relay, ppx/protocol/void_relay.py): where the verdict of a voided
pass travels -- the whole ring, only up to the first retracting rank, or down the proxy only.
`recv` (engine.ordering.output_recv, ppx/protocol/output_recv.py): what an intermediate hop's
output receive asks for -- the batch its upstream relays, or its own slot occupancy. The pass
steps (loop.py) take this strategy and call it; they never read the switches.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppx.protocol.output_recv import OutputRecv
from ppx.protocol.registry import Protocol
from ppx.protocol.void_relay import VoidRelay


@dataclass(frozen=True)
class Ring:
    relay: VoidRelay
    recv: OutputRecv

    @classmethod
    def of(cls, proto: Protocol) -> Ring:
        return cls(proto.of(VoidRelay), proto.of(OutputRecv))
