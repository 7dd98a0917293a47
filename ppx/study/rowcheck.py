"""One run's side of a study's expectations: how a `when` selects runs, and the per-run
checks (verdict, reason, cycle, event sequence, any summary column, choice or override)."""

from __future__ import annotations

import math
import operator
import re
from typing import Any

import pandas as pd

from ppx.analysis.load import EVENT_COLUMNS, load_events, override_value
from ppx.analysis.postmortem import cycle_ranks, cycle_words, load_postmortem
from ppx.study.spec import norm_key, value_text

OPS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_CMP = re.compile(r"^\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*$")


def norm_value(value: Any) -> str | None:
    if value is None or (not isinstance(value, (list, dict)) and pd.isna(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = value_text(value)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return {"True": "true", "False": "false"}.get(text, text)


def lookup(row: pd.Series, key: str) -> Any:
    """A run's value for an override key: its recorded override first (what was asked
    for), then the frame column of the same name or the choice it maps to (`engine/guard`
    -> `guard`), so defaults that were never overridden still match."""
    return override_value(row, norm_key(key))


def select(df: pd.DataFrame, when: dict[str, Any] | None) -> pd.DataFrame:
    if not when:
        return df
    mask = []
    for _, row in df.iterrows():
        ok = True
        for key, want in when.items():
            wants = want if isinstance(want, list) else [want]
            if norm_value(lookup(row, key)) not in {norm_value(w) for w in wants}:
                ok = False
                break
        mask.append(ok)
    return df[pd.Series(mask, index=df.index, dtype=bool)] if len(df) else df


def fmt_when(when: dict[str, Any] | None) -> str:
    if not when:
        return "all runs"
    return " ".join(f"{k}={v}" for k, v in when.items())


def run_cycle(row: pd.Series) -> str | None:
    cycle = row.get("cycle")
    if isinstance(cycle, str) and cycle:
        return cycle
    run_dir = row.get("run_dir")
    return load_postmortem(run_dir).cycle if isinstance(run_dir, str) else None


def check_value(row: pd.Series, key: str, want: Any) -> tuple[bool, str]:
    """One per-run check; returns (holds, what was seen)."""
    if key in ("verdict", "verdict_in"):
        wants = want if isinstance(want, list) else [want]
        have = str(row.get("verdict"))
        return have in {str(w) for w in wants}, f"verdict={have}"
    if key == "cycle_ranks":
        have = cycle_ranks(run_cycle(row))
        return have == sorted(int(r) for r in want), f"cycle ranks={have}"
    if key == "reason_contains":
        # Case-insensitive substring of the run's `reason`; a list means "one of".
        wants = want if isinstance(want, list) else [want]
        reason = row.get("reason")
        have = "" if reason is None or pd.isna(reason) else str(reason)
        ok = any(str(w).lower() in have.lower() for w in wants)
        return ok, f"reason={have!r}"
    if key == "event_sequence":
        specs = want if isinstance(want, list) else [want]
        seen = [event_sequence(row, spec) for spec in specs]
        ok = all(have == [as_number(v) for v in spec["seq"]] for have, spec in zip(seen, specs))
        return ok, "; ".join(f"{fmt_spec(sp)}: {h}" for h, sp in zip(seen, specs))
    if key == "cycle_kinds":
        words = cycle_words(run_cycle(row))
        missing = [k for k in want if str(k).lower() not in words]
        return not missing, f"cycle words={sorted(words)}"
    have = lookup(row, key)  # a summary column, a choice, or an override key
    if have is None and key not in row.index:
        return False, f"no column {key!r}"
    if isinstance(want, str) and (m := _CMP.match(want)):
        num = pd.to_numeric(pd.Series([have]), errors="coerce").iloc[0]
        ok = pd.notna(num) and OPS[m.group(1)](float(num), float(m.group(2)))
        return bool(ok), f"{key}={have}"
    if isinstance(want, list):
        return norm_value(have) in {norm_value(w) for w in want}, f"{key}={have}"
    if want is None:
        return norm_value(have) is None, f"{key}={have}"
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        num = pd.to_numeric(pd.Series([have]), errors="coerce").iloc[0]
        return bool(pd.notna(num) and math.isclose(float(num), want)), f"{key}={have}"
    return norm_value(have) == norm_value(want), f"{key}={have}"


def as_number(value: Any) -> Any:
    text = str(value)
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def fmt_spec(spec: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in spec.items() if k != "seq")


def events_of(row: pd.Series) -> pd.DataFrame:
    """One run's events: its `events` (a list of event rows, where the run kept them in
    memory: an explorer's end, ppx/sim/gallery_expect.py), else its events.parquet."""
    kept = row.get("events")
    if isinstance(kept, list):
        return pd.DataFrame(kept, columns=EVENT_COLUMNS)
    run_dir = row.get("run_dir")
    return load_events(str(run_dir)) if isinstance(run_dir, str) else pd.DataFrame()


def event_sequence(row: pd.Series, spec: dict[str, Any]) -> list[Any]:
    """What an `event_sequence` spec reads off one run's events.parquet, in order: events of
    `kind` (optionally only rank `rank`, rid `rid`), the first group of `field` (a regex) in
    each event's detail, as ints where they are numbers. E.g. rank 0's told for rid 1, from its
    `admit` events: {kind: admit, rank: 0, rid: 1, field: "prefix_len=(-?\\d+)", seq: [120, 64, 50]}."""
    ev = events_of(row)
    if ev.empty:
        return []
    ev = ev[ev["kind"] == spec["kind"]]
    for col in ("rank", "rid"):
        if col in spec:
            ev = ev[ev[col] == int(spec[col])]
    pattern = re.compile(str(spec.get("field", "(.*)")))
    out = []
    for detail in ev["detail"].astype(str):
        m = pattern.search(detail)
        if m is not None:
            out.append(as_number(m.group(1)))
    return out
