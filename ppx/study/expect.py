"""Checking a study's expectations against the runs it produced.

An expectation selects runs with `when` (override key -> value, matched against each run's
Hydra overrides and, failing that, its config choices) and states what must hold for every
selected run, or compares an aggregate between two selections. An expectation that selects
no run is NOT MET: a typo in `when` must not pass silently.

Per-run checks: `verdict` / `verdict_in`, `reason_contains` (a substring, or a list: one of),
`cycle_ranks`, `cycle_kinds`, `event_sequence` (the ordered values a regex reads off one run's
events of a kind, optionally of one rank and rid: rank 0's told for a rid across its offers),
and any summary column, choice or override (`voids: 0`, `retractions: ">0"`, `guard: rid`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ppx.analysis.load import load_requests
from ppx.study.rowcheck import OPS, check_value, fmt_when, lookup, norm_value, select

RESERVED = {"when", "name", "why", "compare", "lhs", "rhs", "op", "agg", "same_outputs"}
RESERVED |= {"same_verdict_as"}


@dataclass
class Result:
    index: int
    description: str
    met: bool
    detail: str
    failing: list[str] = field(default_factory=list)  # run dirs that broke it

    @property
    def status(self) -> str:
        return "MET" if self.met else "NOT MET"


def _describe(exp: dict[str, Any], named: bool = True) -> str:
    """The expectation's `name` (when it has one and `named`), else what it checks."""
    if named and exp.get("name"):
        return str(exp["name"])
    if "compare" in exp:
        agg = exp.get("agg", "mean")
        text = (
            f"{agg} {exp['compare']} [{fmt_when(exp.get('lhs'))}] {exp.get('op', '<')} "
            f"[{fmt_when(exp.get('rhs'))}]"
        )
        return text + (f" within {fmt_when(exp['when'])}" if exp.get("when") else "")
    items = [(k, v) for k, v in exp.items() if k not in RESERVED]
    if exp.get("same_outputs"):
        items.append(("same_outputs", True))
    if exp.get("same_verdict_as"):
        items.append(("same_verdict_as", fmt_when(exp["same_verdict_as"])))
    checks = ", ".join(f"{k}: {v}" for k, v in items)
    return f"{fmt_when(exp.get('when'))} -> {checks or '(no checks)'}"


def _check_compare(df: pd.DataFrame, exp: dict[str, Any]) -> tuple[bool, str]:
    metric, op, agg = exp["compare"], exp.get("op", "<"), exp.get("agg", "mean")
    if op not in OPS:
        return False, f"unknown op {op!r} (use one of {sorted(OPS)})"
    if metric not in df:
        return False, f"no column {metric!r}"
    scope = select(df, exp.get("when"))
    sides = []
    for side in ("lhs", "rhs"):
        part = select(scope, exp.get(side))
        vals = pd.to_numeric(part[metric], errors="coerce").astype("float64").dropna()
        if vals.empty:
            return False, f"{side} [{fmt_when(exp.get(side))}] has no runs with {metric}"
        sides.append((float(vals.agg(agg)), len(vals)))
    (lv, ln), (rv, rn) = sides
    ok = OPS[op](lv, rv)
    return ok, f"{agg} {metric}: {lv:.4g} (n={ln}) {op} {rv:.4g} (n={rn}) is {ok}"


def _outputs(run_dir: str) -> dict[int, tuple[int, ...]] | None:
    """rid -> output token ids of one run's served requests (None without requests.parquet)."""
    req = load_requests(run_dir)
    if req.empty:
        return None
    if "outcome" in req:
        req = req[req["outcome"] == "served"]
    return {int(r): tuple(int(t) for t in ids) for r, ids in zip(req["rid"], req["output_ids"])}


def _check_same_outputs(runs: pd.DataFrame) -> tuple[bool, str, list[str]]:
    """Every selected run served the same requests with token-identical outputs (what an
    oracle-checked engine must do whatever the admission policy). Compared to the first."""
    if len(runs) < 2:
        return False, f"same_outputs needs at least 2 runs, {len(runs)} selected", []
    dirs = [str(d) for d in runs["run_dir"]]
    ref = _outputs(dirs[0])
    if ref is None:
        return False, f"{dirs[0]} has no requests.parquet", [dirs[0]]
    failing, seen = [], []
    for run_dir, run_id in zip(dirs[1:], runs["run_id"].iloc[1:]):
        have = _outputs(run_dir)
        if have is None:
            failing.append(run_dir)
            seen.append(f"{run_id}: no requests.parquet")
            continue
        if set(have) != set(ref):
            failing.append(run_dir)
            seen.append(f"{run_id}: served rids differ ({len(have)} vs {len(ref)})")
            continue
        diff = sorted(r for r in ref if have[r] != ref[r])
        if diff:
            failing.append(run_dir)
            seen.append(f"{run_id}: outputs differ for rids {diff[:5]}")
    tokens = sum(len(v) for v in ref.values())
    detail = f"outputs of {len(runs)} runs ({len(ref)} requests, {tokens} tokens each) "
    detail += ("differ: " + "; ".join(seen)) if seen else "identical"
    return not failing, detail, failing


def _check_twins(
    df: pd.DataFrame, runs: pd.DataFrame, twin: dict[str, Any], labels: list[str]
) -> tuple[bool, str, list[str]]:
    """`same_verdict_as`: each selected run ends with the verdict of its twin -- the run that
    `twin` selects whose other labels (the cell's identity, e.g. incident and arm) are its own."""
    ident = [k for k in labels if k not in twin]
    if not ident:
        return False, "same_verdict_as needs cell labels that identify a twin", []
    key = lambda row: tuple(norm_value(lookup(row, k)) for k in ident)  # noqa: E731
    twins = {key(row): row for _, row in select(df, twin).iterrows()}
    failing, seen = [], []
    for _, row in runs.iterrows():
        t = twins.get(key(row))
        theirs = None if t is None else str(t.get("verdict"))
        if theirs != str(row.get("verdict")):
            failing.append(str(row.get("run_dir")))
            who = " ".join(f"{k}={lookup(row, k)}" for k in ident)
            seen.append(f"{who}: {row.get('verdict')} vs {theirs or 'no twin'}")
    detail = f"{len(runs) - len(failing)}/{len(runs)} runs end as their twin [{fmt_when(twin)}]"
    return not failing, detail + ("; " + "; ".join(seen[:5]) if seen else ""), failing


def check_expectations(
    df: pd.DataFrame, expect: list[dict[str, Any]], labels: list[str] | None = None
) -> list[Result]:
    """Evaluate every expectation on the runs frame (`ppx.analysis.load_runs`); `labels`:
    the study's cell label names (what `same_verdict_as` pairs twins by)."""
    results = []
    for i, exp in enumerate(expect, start=1):
        desc = _describe(exp)
        # A named expectation still says what it checked, ahead of what was seen.
        checked = f"[{_describe(exp, named=False)}] " if exp.get("name") else ""
        if "compare" in exp:
            ok, detail = _check_compare(df, exp)
            results.append(Result(i, desc, ok, checked + detail))
            continue
        runs = select(df, exp.get("when"))
        if runs.empty:
            detail = f"no run matches {fmt_when(exp.get('when'))}"
            results.append(Result(i, desc, False, checked + detail))
            continue
        checks = {k: v for k, v in exp.items() if k not in RESERVED}
        failing, seen = [], []
        same_ok, same_detail = True, ""
        if exp.get("same_outputs"):
            same_ok, same_detail, failing = _check_same_outputs(runs)
        if exp.get("same_verdict_as"):
            same_ok, same_detail, failing = _check_twins(
                df, runs, exp["same_verdict_as"], list(labels or [])
            )
        for _, row in runs.iterrows():
            bad = []
            for key, want in checks.items():
                ok, what = check_value(row, key, want)
                if not ok:
                    bad.append(what)
            if bad:
                if str(row.get("run_dir")) not in failing:
                    failing.append(str(row.get("run_dir")))
                seen.append(f"{row.get('run_id')}: {', '.join(bad)}")
        n = len(runs)
        detail = f"{checked}{n - len(failing)}/{n} runs hold"
        if same_detail:
            detail += f"; {same_detail}"
        if seen:
            detail += "; " + "; ".join(seen[:5]) + (" ..." if len(seen) > 5 else "")
        results.append(Result(i, desc, same_ok and not failing, detail, failing))
    return results
