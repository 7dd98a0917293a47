"""A switch outside the protocol package: a config key whose value names one entry of a fixed
table (the kernels, the model kind, the workload's source, the start method, the simulator's
clock and wire rules). Code asks the entry what it needs to know; no one compares the value
with a string. An unknown value is refused in the protocol registry's words, one line,
`key='value': a | b | c`, by `validate` before anything is spawned (ppx/validation.py runs
every table in SWITCHES of the modules that own them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from ppx.protocol.axis import select, spelled

T = TypeVar("T")


class Switch(Generic[T]):
    """`key`'s table: value -> entry."""

    def __init__(self, key: str, entries: Mapping[str, T]) -> None:
        self.key, self.entries = key, dict(entries)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.entries)

    def refusal(self, value: Any) -> str | None:
        """The one line an unknown value is refused with; None for a known one."""
        if str(value) in self.entries:
            return None
        return f"{self.key}={value!r}: {' | '.join(spelled(n) for n in self.entries)}"

    def get(self, value: Any) -> T:
        why = self.refusal(value)
        if why is not None:
            raise ValueError(why)
        return self.entries[str(value)]

    def of(self, cfg: Any) -> T:
        """The entry `cfg` names (a DictConfig or the typed config)."""
        return self.get(select(cfg, self.key))
