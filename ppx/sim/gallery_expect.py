"""A gallery cell's own expectation as the property an exhaustive search looks for.

The study checks a cell's runs against its expectations (experiments/incident_gallery.yaml,
ppx/study/expect.py). The search checks each schedule's end against the same expectations,
with the same evaluator (`check_expectations` on a one-row frame): the end's row is what the
study's row of a run holds (summary.build's columns: verdict, reason, cycle, every counter,
served, submitted, oracle_mismatches, cached_tokens; and the events, kept in memory, where an
`event_sequence` reads them). The search's failing end is then

- for a red: an end that MEETS the red expectation (the incident reproduced: a counter or an
  event sequence as well as a failing verdict), so `refuted` is the shortest schedule that
  shows the incident, and a served end can be that schedule;
- for a green: an end that does NOT meet the green expectation, so `verified` says every
  interleaving meets it (its counters too, not only `served`).

What the property leaves out of the expectation, and why:

- the texts the study's run printed, `reason` and `cycle`: they carry its model's tokens and
  its clock's pass numbers, both cut by the gallery's walk (hash model, idle clock); what
  they are about stays checked by `reason_contains`, `cycle_kinds` and `cycle_ranks`;
- what compares runs (`compare`, `same_outputs`, `same_verdict_as`): no one end meets them;
- for a green below the cell's own load (a lower rung of the ladder): the checks that count
  the load -- an exact number other than 0, a lower bound (`">0"`), an event sequence (the
  told values follow the prefix length): a smaller load is not wrong for having fewer voids.
  Where a green's expectation is a named stop, an end that serves clean (oracle-checked)
  meets it too below its own load: what the design stops for may never come at a smaller
  load, and serving is then right.
  A red keeps them at every rung: its search asks for an end that meets them all, so a
  check a rung cannot meet only sends the red up the ladder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ppx.analysis.load import summary_record
from ppx.sim.runner import failure_key
from ppx.study.expect import RESERVED, check_expectations
from ppx.study.rowcheck import _CMP, check_value, select

PRINTED = ("reason", "cycle")  # the study's run's own texts (the module docstring)
CROSS_RUN = ("compare", "same_outputs", "same_verdict_as")
LOAD_FREE = ("verdict", "verdict_in", "reason_contains", "cycle_ranks", "cycle_kinds")


def counts_the_load(key: str, want: Any) -> bool:
    """A check whose value scales with the load: an exact number other than 0, a lower
    bound or an equality to a number other than 0, an event sequence."""
    if key in LOAD_FREE:
        return False
    if key == "event_sequence":
        return True
    if isinstance(want, str) and (m := _CMP.match(want)):
        op, num = m.group(1), float(m.group(2))
        return op in (">", ">=", "!=") or (op == "==" and num != 0)
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return want != 0
    return False


def cell_expectations(study, index: int) -> list[dict[str, Any]]:
    """The per-run expectations of the study's cell `index`: those whose `when` selects a
    run of it (its labels, its overrides and the choices they name)."""
    cell, label = study.cells[index], study.labels[index]
    ident = pd.DataFrame([{**label, **{k.split("/")[-1]: v for k, v in cell.items()},
                           "overrides": {k: str(v) for k, v in cell.items()}}])  # fmt: skip
    out = []
    for exp in study.expect:
        if any(k in exp for k in CROSS_RUN) or select(ident, exp.get("when")).empty:
            continue
        out.append(exp)
    return out


# a serve the oracle found clean: what a green that stops by name at its own load may do at
# a smaller one, where what it stops for never comes
CLEAN_SERVE = {"verdict": "served", "oracle_mismatches": 0}


def _serves(check: dict[str, Any]) -> bool:
    """Does the expectation accept a served end (its verdict check, if any, allows it)?"""
    want = check.get("verdict", check.get("verdict_in", "served"))
    return "served" in (want if isinstance(want, list) else [want])


@dataclass
class EndProperty:
    """What a search looks for in each end (the module docstring): `__call__` returns the
    failing end's key (None: not failing)."""

    arm: str
    checks: list[dict[str, Any]]  # the expectations as checked (`when` and PRINTED left out)
    needs_events: bool
    # a cycle on a run's own path never ends the run: it fails a green (no end can meet a
    # green's expectation from inside it), and shows no red incident (nothing to check)
    cycle_fails: bool
    # the end row's columns the checks read (a frame of ~100 columns costs ~10 ms a row)
    reads: frozenset[str] = frozenset()
    # an end that meets these instead also meets the property: a green's clean serve below
    # its own load, where its expectation is a named stop (the module docstring)
    instead: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, expectations: list[dict[str, Any]], arm: str, own_load: bool) -> EndProperty:
        checks = []
        for exp in expectations:
            kept = {k: v for k, v in exp.items() if k != "when" and k not in PRINTED}
            if arm == "green" and not own_load:
                kept = {k: v for k, v in kept.items()
                        if k in RESERVED or not counts_the_load(k, v)}  # fmt: skip
            checks.append(kept)
        instead = []
        if arm == "green" and not own_load and any(not _serves(c) for c in checks):
            instead = [CLEAN_SERVE]
        events = any("event_sequence" in c for c in checks)
        keys = {k for c in [*checks, *instead] for k in c} | {"verdict", "reason", "cycle"}
        return cls(arm, checks, events, arm != "red", frozenset(keys | {"run_id", "events"}),
                   instead)  # fmt: skip

    def __call__(self, row: dict) -> str | None:
        # the study's row (summary_record), not its typed frame: runs_frame's coercion costs
        # ~100 ms a row, and the checks read numbers and texts either way
        rec = summary_record(row) | {"run_id": "end", "events": row.get("events")}
        df = pd.DataFrame([{k: v for k, v in rec.items() if k in self.reads}])
        met = all(r.met for r in check_expectations(df, self.checks))
        if not met and self.instead:
            met = all(r.met for r in check_expectations(df, self.instead))
        if met != (self.arm == "red"):
            return None
        seen = df.iloc[0]
        # what the checks saw, numbers blanked: one key for every end of one kind
        what = sorted({what for c in self.checks for k, v in c.items() if k not in RESERVED
                       and k not in LOAD_FREE for what in [check_value(seen, k, v)[1]]})  # fmt: skip
        base = failure_key(row["verdict"], row["reason"], row.get("cycle")).rstrip()
        tail = re.sub(r"\d+", "#", ", ".join(what))[:120]
        return f"{base} [{'meets' if met else 'not met'}: {tail}]" if tail else base
