"""Which mechanisms a simulated run exercised, and over an exploration in how many scenarios.

A run's counters are read from the ranks' reports the way summary.json reads them (a group
counter is one event every rank records: the max over ranks; the others are each rank's own:
summed), plus `cutovers` (the cutovers rank 0 timed). A mechanism *fired* in a scenario when
one of its counters was > 0 in any schedule of it. `MECHANISMS` names the issue's nine in
the registry's words; summary.json's `mechanisms` counts every counter.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ppx.telemetry.summary import GROUP_COUNTERS, GROUP_EVENTS

# the mechanisms an exploration should reach, each by the counters that say it ran
MECHANISMS: dict[str, tuple[str, ...]] = {
    "voids": ("voids",),
    "retractions": ("retractions", "retracted_at_flip"),
    "floors_learned": ("guard_floors_learned",),
    "defers": ("unresolved", "row_defers", "prefetch_deferred", "load_back_deferred"),
    "flips": ("flips",),
    "cutovers": ("cutovers",),
    "carried_continuations": ("carried_at_flip",),
    "escalations": ("escalations",),
    "refusals": ("refusals", "second_continuation_refusals"),
}
COUNTER_NAMES = (*GROUP_COUNTERS, "cutovers")


def counters_of(reports: dict) -> dict[str, int]:
    """The counters of one run that are > 0, from its ranks' reports (a rank's counter is a
    report key or in its `counters`, as summary.json reads it)."""
    out: dict[str, int] = {}
    for k in GROUP_COUNTERS:
        vals = [int(rep.get(k, rep.get("counters", {}).get(k, 0)) or 0) for rep in reports.values()]
        v = max(vals, default=0) if k in GROUP_EVENTS else sum(vals)
        if v:
            out[k] = v
    cut = len((reports.get(0) or {}).get("cutover_ms", []))
    if cut:
        out["cutovers"] = cut
    return out


def fired(counters: dict[str, int]) -> set[str]:
    """The mechanisms (MECHANISMS' names) these counters show."""
    return {m for m, names in MECHANISMS.items() if any(counters.get(n) for n in names)}


@dataclass
class Coverage:
    """Per counter and per mechanism, the number of scenarios in which it fired."""

    counters: Counter = field(default_factory=Counter)
    mechanisms: Counter = field(default_factory=Counter)
    scenarios: int = 0

    def add(self, counters: dict[str, int]) -> float:
        """Count one scenario's counters (the union over its schedules); returns its novelty:
        what the generator steers toward, high for mechanisms that fired in few scenarios
        before this one (a mechanism never seen counts 1, one seen n times 1 / (n + 1))."""
        mech = fired(counters)
        novelty = sum(1.0 / (1 + self.mechanisms[m]) for m in mech)
        self.scenarios += 1
        self.counters.update({k: 1 for k, v in counters.items() if v})
        self.mechanisms.update({m: 1 for m in mech})
        return novelty

    def missing(self, absent: dict[str, str] | None = None) -> list[str]:
        """The groups the design has (not in `absent`) that fired in no scenario."""
        return [m for m in MECHANISMS if not self.mechanisms[m] and m not in (absent or {})]

    def as_dict(self, absent: dict[str, str] | None = None) -> dict:
        """summary.json's keys: `mechanisms` (every counter name -> scenarios in which it
        fired), `mechanism_groups` (MECHANISMS' names -> the same), `mechanisms_absent` (the
        groups the design cannot fire, each with its reason: design_scope.absent, decided
        from the config) and `mechanisms_missing` (the groups it has that never fired)."""
        absent = absent or {}
        return {
            "mechanisms": {k: int(self.counters[k]) for k in COUNTER_NAMES},
            "mechanism_groups": {m: int(self.mechanisms[m]) for m in MECHANISMS},
            "mechanisms_absent": {m: absent[m] for m in MECHANISMS if m in absent},
            "mechanisms_missing": self.missing(absent),
        }
