"""How the supervisor starts its rank processes (`engine.start_method`), each with what
starting that way implies; the supervisor asks the entry, never compares the name."""

from __future__ import annotations

from dataclasses import dataclass

from ppx.switch import Switch


@dataclass(frozen=True)
class StartMethod:
    context: str  # the multiprocessing context
    # every rank a fork of one server that imported the engine once: ranks boot in tens of ms,
    # and the server's environment is its first start's, so each rank carries this one's
    from_server: bool = False


START_METHODS: Switch[StartMethod] = Switch(
    "engine.start_method",
    {"forkserver": StartMethod("forkserver", from_server=True), "spawn": StartMethod("spawn")},
)
