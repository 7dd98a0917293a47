"""What of a design the scenario generator may vary, and which mechanisms it cannot fire.

Two questions about the composed config of the design under test, both answered from the
config alone (never from what an exploration observed):

- `open_switches`: the protocol switches a scenario may draw because the design leaves them
  open: at the schema's default and named by no override. A switch the researcher set, even to
  its default, is the design under test and is kept.
- `absent`: the mechanism groups (coverage.MECHANISMS) that no scenario of the design can fire,
  each with a one-line reason, so an exploration's `mechanisms_missing` lists only what the
  design has and never ran. A group is absent only where the code has no path to its
  counters under this config; where in doubt it is not absent (a missing group says "look",
  an absent one says "nothing to see").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ppx.protocol.axis import select
from ppx.protocol.continuations import CONTINUATIONS, CUTOVER, SECOND, PerSlot, Survive
from ppx.protocol.flip_due import AXIS as DUE
from ppx.protocol.guard.floors import AXIS as GUARD
from ppx.protocol.policy import policy_of
from ppx.protocol.void import AXIS as VOID

# the switches a scenario may draw where the design leaves them open (scenario.py draws them)
DRAWN_SWITCHES = (CUTOVER, DUE, CONTINUATIONS)


def named_keys(overrides: Iterable[str]) -> set[str]:
    """The config keys a list of Hydra overrides sets (`+`, `++` and `~` stripped)."""
    return {o.split("=", 1)[0].lstrip("+~") for o in overrides if "=" in o}


def open_switches(base: Any, overrides: Iterable[str] = ()) -> frozenset[str]:
    """The keys of DRAWN_SWITCHES at their default that no override names."""
    named = named_keys(overrides)
    return frozenset(
        a.key for a in DRAWN_SWITCHES if select(base, a.key) == a.default and a.key not in named
    )


def carries(base: Any, open_: frozenset[str]) -> bool:
    """Can a continuation survive a cutover: flip.continuation=survive, the design's or drawn
    where it leaves the switch open (Survive.refuse: pp >= 2, both layouts are one at pp=1)."""
    return int(base.pp) >= 2 and (CUTOVER.key in open_ or select(base, CUTOVER.key) == Survive.name)


def absent(
    base: Any, open_: frozenset[str] = frozenset(), no_flip: str | None = None
) -> dict[str, str]:
    """Mechanism group -> why no scenario of this design can fire it (coverage.MECHANISMS'
    names), from the config, the switches scenarios may draw (`open_`) and why the design
    refuses flips (`no_flip`: scenario.flips_refused; None, it flips)."""
    p = policy_of(base)
    out: dict[str, str] = {}
    if no_flip is not None:
        for g in ("flips", "cutovers", "carried_continuations"):
            out[g] = f"the design refuses flips: {no_flip}"
    survives = no_flip is None and carries(base, open_)
    if no_flip is None and not survives:
        out["carried_continuations"] = (
            f"{CUTOVER.key}={select(base, CUTOVER.key)} is the design's: a cutover re-queues "
            "every continuation, none is carried"
            if int(base.pp) >= 2
            else "pp=1: no continuation survives a cutover between layouts that are one"
        )
    if not p.decides:
        why = f"engine/admission={p.name}: rank 0 decides nothing"
        out["voids"] = f"{why}, so no follower retracts and no pass is voided"
        out["floors_learned"] = f"{why}: no decision, no guard to learn a floor"
        out["defers"] = f"{why}: no guard, no decision row to probe, no extent to publish"
        out["escalations"] = f"{why}: no guard to escalate a deferred rid"
    else:
        guard = select(base, GUARD.key)
        cap = int(base.engine.guard.defer_cap)
        if guard == "off":
            out["floors_learned"] = f"engine/guard={guard}: the guard learns no floor"
            out["escalations"] = f"engine/guard={guard}: the guard escalates nothing"
        elif cap <= 0:
            out["escalations"] = f"engine.guard.defer_cap={cap}: the escalation is disabled"
    if no_flip is not None and (not p.decides or p.executes):
        out["retractions"] = (
            f"no flip (no cutover retracts) and engine/admission={p.name}'s followers never "
            "retract a row"
        )
    if not p.executes:
        second = _second_continuation_absent(base, open_, survives)
        if second is not None:
            out["refusals"] = (
                f"engine/admission={p.name}: no follower executes rank 0's rows, so none "
                f"refuses one; and {second}"
            )
    return out


def _second_continuation_absent(base: Any, open_: frozenset[str], survives: bool) -> str | None:
    """Why the sgl-project#959 guard never counts a refusal here, or None: it refuses where a
    continuation carried into the one-slot TP plan meets another resident with no cell, which
    takes one that survives the cutover and more than one resident mid-prefill (a cell per
    slot, or a void that parks outside the pointer)."""
    second = select(base, SECOND.key)
    if second != SECOND.default:
        return f"{SECOND.key}={second} counts no refusal"
    if not survives:
        return "no continuation survives a cutover to meet a second one"
    per_slot = CONTINUATIONS.key in open_ or select(base, CONTINUATIONS.key) == PerSlot.name
    if not per_slot and select(base, VOID.key) != "keep":
        return (
            f"{CONTINUATIONS.key}={select(base, CONTINUATIONS.key)} (the design's) holds one "
            "continuation per rank: none is ever left without a cell"
        )
    return None
