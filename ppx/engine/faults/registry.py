"""The fault table: every fault ppx can inject, one line each (its plug-in class names the
`faults.<key>` section it owns). Validation asks `refusal`; a rank asks `RankFaults`
(rank_faults.py), the supervisors `run_faults`. Adding a fault: its section in
ppx/fault_sections.py, its class here in ppx/engine/faults/, one line below
(docs/extending.md)."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from ppx.engine.faults import offer, retract, run_level, skews, tree, wire
from ppx.engine.faults.base import RUN, Fault
from ppx.fault_sections import FaultsCfg

if TYPE_CHECKING:
    from ppx.engine.transport.base import Transport

# One line per fault. The order is the order their hooks run in on a rank: of the wire
# faults, a dropped or corrupted output is decided before the channel numbers it, and a lost
# message is never also delayed.
FAULTS: tuple[type[Fault], ...] = (
    wire.DropVoidOutput,
    wire.Corrupt,
    wire.Lose,
    wire.Delay,
    run_level.Pool,
    run_level.Kill,
    skews.Lifo,
    skews.EpochDesync,
    offer.OfferFlap,
    tree.MatchCap,
    tree.CacheDrop,
    retract.Retract,
)

SECTIONS = tuple(f.name for f in fields(FaultsCfg) if f.name not in ("name", "timing"))
assert sorted(SECTIONS) == sorted(f.key for f in FAULTS), "one section per fault, one fault each"


def section(cfg: Any, fault: type[Fault]) -> Any:
    return getattr(cfg.faults, fault.key)


def active(cfg: Any, rank: int = RUN, t: Transport | None = None) -> list[Fault]:
    """The faults that act on `rank` (RUN: the run-level instances), in the table's order;
    `t`: the rank's transport, which a fault's timed moments ask (Fault.moment)."""
    out = []
    for cls in FAULTS:
        sec = section(cfg, cls)
        if cls.on(sec):
            fault = cls(sec, cfg, rank)
            fault.t = t
            if rank == RUN or fault.here():
                out.append(fault)
    return out


def refusal(cfg: Any) -> str | None:
    """The first fault whose section means nothing under `cfg`: one line naming it."""
    for cls in FAULTS:
        why = cls.refuse(section(cfg, cls), cfg)
        if why is not None:
            return why
    return None
