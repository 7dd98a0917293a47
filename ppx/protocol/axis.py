"""What a protocol design is: one variant of one axis, behind the axis's narrow interface.

An axis is one question the reference log answered more than once ("what order does a follower
run rank 0's rows in?"); each answer it tried is a `Variant` subclass of the axis's base class,
with the hooks the engine calls, its reference, what it requires of the rest of the config
(`refuse`), and the counters it keeps. The engine never compares a switch's string: it asks
the variant the config chose (`ppx.protocol.registry.Protocol`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


def select(cfg: Any, key: str) -> Any:
    """`cfg.a.b.c` for "a.b.c", on a DictConfig or the typed dataclasses alike."""
    node = cfg
    for part in key.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return node


def spelled(value: Any) -> str:
    """A switch value as the user types it: `true`, `null`, `keep`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


@dataclass(frozen=True)
class Counter:
    """A counter a design keeps on each rank. `group`: one group event every rank records
    (the summary takes the max over ranks); otherwise each rank's own (the summary sums)."""

    name: str
    group: bool = False


@dataclass(frozen=True)
class Param:
    """A number a design reads (a bound, a cap): recorded flat beside the switches."""

    key: str  # config path
    choice: str  # its flat name in summary.json's choices and the W&B config


@dataclass(frozen=True)
class Axis:
    key: str  # the config path of the switch, e.g. "engine.admission.batch_order"
    choice: str  # its flat name in summary.json's choices and the W&B config
    about: str  # the question the axis answers, one line (the switch table)
    default: Any  # the design the log settled on
    counters: tuple[Counter, ...] = ()
    params: tuple[Param, ...] = ()


class Variant:
    """One design. Subclasses of an axis's base class set `name`, `ref` and `about`."""

    axis: ClassVar[Axis]
    name: ClassVar[Any]  # the switch value (a string; a bool or None for a few axes)
    ref: ClassVar[str] = ""  # where the reference log has it
    about: ClassVar[str] = ""  # what it does, one line

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        """Why this design cannot mean anything under `cfg` (one line naming the switches),
        or None. A switch set where nothing reads it is a config the researcher believes
        tests something it does not."""
        return None

    @classmethod
    def switch(cls) -> str:
        return f"{cls.axis.key}={spelled(cls.name)}"

    # pass steps this design adds to the ordering vocabulary (engine.ordering.steps names them
    # like the built-in ones); the pass runs `run_step` at each, with no loop edit
    pass_steps: ClassVar[tuple[str, ...]] = ()

    def run_step(self, name: str, ctx: Any, p: Any) -> None:
        """Run this design's pass step `name` for pass `p` (its slot, pass_id, batch)."""
        raise NotImplementedError(f"{self.switch()} declares no pass step {name!r}")

    def counters(self) -> dict[str, int]:
        return {}
