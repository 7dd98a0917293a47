"""The run-store schema as the analysis side reads it.

One place names every summary field and its dtype, so the loaders, the W&B loader and the
study runner agree on column names and types without each re-deriving them.
"""

from __future__ import annotations

import pandas as pd

from ppx.telemetry.summary import CHOICE_KEYS, GROUP_COUNTERS

# Ordered from "good" to "bad" so sorted legends and grids read naturally.
VERDICTS: tuple[str, ...] = (
    "served",
    "stopped",
    "interrupted",
    "timeout",
    "straggler",
    "mismatch",
    "stalled",
    "livelocked",
    "lost",
    "wedged",
    "dead_peer",
    "crashed",
)

# One fixed colour per verdict so a verdict keeps its colour across every figure.
VERDICT_COLORS: dict[str, str] = {
    "served": "#4caf50",
    "stopped": "#8bc34a",
    "interrupted": "#bdbdbd",
    "timeout": "#ffb300",
    "straggler": "#ffd54f",
    "mismatch": "#9c27b0",
    "stalled": "#ffa726",
    "livelocked": "#ff7043",
    "lost": "#d81b60",
    "wedged": "#e53935",
    "dead_peer": "#6d4c41",
    "crashed": "#212121",
}
UNKNOWN_COLOR = "#90a4ae"

CHOICE_INT = (
    "pp",
    "tp",
    "seed",
    "livelock_passes",
    "defer_cap",
    # flip churn (flip.due)
    "flip_drain_cap",
    "livelock_flips",
    "livelock_readmits",
)
CHOICE_FLOAT = ("prefetch_bound_ms", "readiness_budget_s")
CHOICE_BOOL = ("readiness",)

# the group counters are named once, where summary.json is written
SUMMARY_INT: tuple[str, ...] = (
    "submitted",
    "served",
    "refused",
    "lost",
    "cached_tokens",
    "oracle_mismatches",
    "ledger_violations",
    *GROUP_COUNTERS,
    "passes",
)
SUMMARY_FLOAT: tuple[str, ...] = (
    "out_tok_s",
    "prefill_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "itl_ms_p50",
    "itl_ms_p90",
    "cutover_ms_p50",
    "cutover_ms_max",
    "wall_s",
)
SUMMARY_STR: tuple[str, ...] = ("reason", "cycle", "run_id", "study")

# Summary keys that are not scalars; they stay out of the one-row-per-run frame.
NESTED_KEYS = ("choices", "per_rank", "blocked_on")

# A frame column may not reuse a summary name for a choice: `served` is both a count and a
# verdict value, but no choice key collides with a summary key, so both live side by side.
RUN_COLUMNS: tuple[str, ...] = (
    ("run_id", "run_dir", "verdict")
    + CHOICE_KEYS
    + SUMMARY_INT
    + SUMMARY_FLOAT
    + ("reason", "cycle", "study")
)

METRIC_COLUMNS = ("out_tok_s", "ttft_ms_p50", "itl_ms_p50", "voids", "flips", "retractions")


def verdict_dtype() -> pd.CategoricalDtype:
    return pd.CategoricalDtype(categories=list(VERDICTS), ordered=False)


def coerce_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Give a frame of run records the schema dtypes, in place of whatever inference chose.

    Unknown verdicts are appended as extra categories rather than turned into NaN, because
    an engine that grows a new verdict must still show up in every table.
    """
    for col in SUMMARY_INT + CHOICE_INT:
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    for col in SUMMARY_FLOAT:
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    for col in CHOICE_FLOAT:
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    for col in CHOICE_BOOL:
        if col in df:
            df[col] = df[col].astype("boolean")
    for col in CHOICE_KEYS:
        if col in df and col not in CHOICE_INT + CHOICE_FLOAT + CHOICE_BOOL:
            df[col] = df[col].astype("string")
    for col in SUMMARY_STR + ("run_dir",):
        if col in df:
            df[col] = df[col].astype("string")
    if "verdict" in df:
        seen = [v for v in pd.unique(df["verdict"].dropna()) if v not in VERDICTS]
        cats = list(VERDICTS) + sorted(str(v) for v in seen)
        df["verdict"] = pd.Categorical(df["verdict"], categories=cats)
    return df
