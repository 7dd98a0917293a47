"""Loading run directories into pandas frames.

`load_runs` reads only the small `summary.json` (and the Hydra overrides) of each run, so a
directory of hundreds of runs loads in well under a second; the parquet time series are
read on demand by `load_series`/`load_events`/`load_requests` for the runs one looks at.
"""

from __future__ import annotations

import glob
import json
import os
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from ppx.analysis.schema import CHOICE_KEYS, NESTED_KEYS, RUN_COLUMNS, coerce_runs

PathLike = str | os.PathLike
RunsArg = PathLike | Iterable[PathLike] | pd.DataFrame

SERIES_COLUMNS = ["t_s", "rank", "phase", "epoch", "passes", "tokens", "finished", "voids"]
SERIES_COLUMNS += ["flips", "retractions", "out_tok_s"]
EVENT_COLUMNS = ["t_s", "rank", "kind", "pass_id", "slot", "rid", "epoch", "detail"]
REQUEST_COLUMNS = ["rid", "prompt_len", "output_len", "output_ids", "ttft_ms", "itl_ms"]
REQUEST_COLUMNS += ["outcome", "reason", "submit_t_s", "finish_t_s", "cached_tokens"]

# Columns copied from a runs frame onto per-row tables so one can group requests or
# events by policy without a manual merge. Summary counters are left out on purpose:
# `cached_tokens` exists in both summary and requests with different meanings.
_JOIN_KEYS = CHOICE_KEYS + ("verdict", "study", "cell")

_OVERRIDE_LINE = re.compile(r"^\s*-\s*(.*?)\s*$")


def _natural_key(path: str) -> list[Any]:
    # Hydra numbers jobs 0..N; "10" must sort after "9", not after "1".
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path)]


def read_overrides(run_dir: PathLike) -> dict[str, str]:
    """Parse `.hydra/overrides.yaml` into {key: value} with the `+`/`++` prefix dropped.

    A tiny line parser instead of a YAML load: Hydra writes one quoted-or-plain string per
    list item, and skipping the YAML machinery keeps `load_runs` fast on big sweeps.
    """
    path = Path(run_dir) / ".hydra" / "overrides.yaml"
    out: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        m = _OVERRIDE_LINE.match(line)
        if not m or not m.group(1) or m.group(1) == "[]":
            continue
        item = m.group(1)
        if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
            item = item[1:-1]
        key, sep, value = item.partition("=")
        if sep:
            out[key.lstrip("+~")] = value
    return out


def load_summary(run_dir: PathLike) -> dict[str, Any]:
    """The raw `summary.json` of one run (nested `per_rank`/`blocked_on` included)."""
    with open(Path(run_dir) / "summary.json") as fh:
        return json.load(fh)


def summary_record(summary: dict[str, Any]) -> dict[str, Any]:
    """Flatten one summary into a frame row: choices become top-level; nested values
    (per-rank lists, `blocked_on`, any list an engine adds) stay out of the flat frame."""
    rec = {
        k: v for k, v in summary.items() if k not in NESTED_KEYS and not isinstance(v, (list, dict))
    }
    for key, value in (summary.get("choices") or {}).items():
        rec[key] = value
    return rec


def runs_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Build the typed one-row-per-run frame from flattened records (shared with W&B)."""
    df = pd.DataFrame.from_records(records)
    for col in RUN_COLUMNS:
        if col not in df:
            df[col] = pd.NA
    extra = [c for c in df.columns if c not in RUN_COLUMNS and c != "overrides"]
    tail = ["overrides"] if "overrides" in df else []
    df = df[list(RUN_COLUMNS) + extra + tail]
    return coerce_runs(df).reset_index(drop=True)


def load_runs(
    root: PathLike | Iterable[PathLike],
    pattern: str = "**/summary.json",
    overrides: bool = True,
) -> pd.DataFrame:
    """One row per run found under `root` (or several roots).

    Columns: `run_id`, `run_dir`, `verdict` (category), every config choice (`pp`, `guard`,
    ...), every scalar summary figure, and `overrides` (the Hydra overrides as a dict) so
    that sweeps over keys that are not choices can still be grouped.
    """
    roots = [root] if isinstance(root, (str, os.PathLike)) else list(root)
    paths: list[str] = []
    for r in roots:
        paths.extend(glob.glob(os.path.join(os.fspath(r), pattern), recursive=True))
    paths = sorted(set(paths), key=_natural_key)
    records: list[dict[str, Any]] = []
    for path in paths:
        run_dir = os.path.dirname(path)
        try:
            with open(path) as fh:
                summary = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            # A summary still being written by a live run must not sink the whole load.
            warnings.warn(f"skipping unreadable {path}: {exc}", stacklevel=2)
            continue
        rec = summary_record(summary)
        rec["run_dir"] = run_dir
        if not rec.get("run_id"):
            rec["run_id"] = os.path.basename(run_dir)
        if overrides:
            rec["overrides"] = read_overrides(run_dir)
        records.append(rec)
    return runs_frame(records)


def _as_run_dirs(runs: RunsArg) -> list[tuple[str, str]]:
    """Normalise the accepted run selectors to [(run_dir, run_id)]."""
    if isinstance(runs, pd.DataFrame):
        ids = runs["run_id"] if "run_id" in runs else runs["run_dir"].map(os.path.basename)
        return [(str(d), str(i)) for d, i in zip(runs["run_dir"], ids)]
    items = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)
    out: list[tuple[str, str]] = []
    for item in items:
        path = Path(item)
        if (path / "summary.json").exists() or not path.is_dir() or _has_tables(path):
            out.append((str(path), _run_id(path)))
        else:
            # A sweep root rather than a run dir: take every run beneath it.
            df = load_runs(path, overrides=False)
            out.extend(zip(df["run_dir"].astype(str), df["run_id"].astype(str)))
    return out


def _has_tables(path: Path) -> bool:
    return any((path / f).exists() for f in ("metrics.parquet", "events.parquet"))


def _run_id(path: Path) -> str:
    try:
        return str(load_summary(path).get("run_id") or path.name)
    except (OSError, json.JSONDecodeError):
        return path.name


def _load_table(runs: RunsArg, filename: str, columns: list[str]) -> pd.DataFrame:
    frames = []
    for run_dir, run_id in _as_run_dirs(runs):
        path = os.path.join(run_dir, filename)
        if not os.path.exists(path):
            continue
        df = pq.read_table(path).to_pandas()
        df["run_dir"] = run_dir
        df["run_id"] = run_id
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=columns + ["run_dir", "run_id"])
    out = pd.concat(frames, ignore_index=True)
    if isinstance(runs, pd.DataFrame):
        # Choices, plus override-key columns added by `with_overrides` (`faults.pool.tokens`,
        # `engine/guard`), so per-row tables group by the same keys as the runs frame.
        overrides = [c for c in runs.columns if isinstance(c, str) and ("/" in c or "." in c)]
        keys = [k for k in (*_JOIN_KEYS, *overrides) if k in runs and k not in out]
        if keys:
            out = out.merge(runs[["run_dir", *keys]].astype({"run_dir": str}), on="run_dir")
    return out


def load_series(runs: RunsArg) -> pd.DataFrame:
    """`metrics.parquet` of one or many runs, with `run_dir`/`run_id` (and choices when
    `runs` is a `load_runs` frame)."""
    return _load_table(runs, "metrics.parquet", SERIES_COLUMNS)


def load_events(runs: RunsArg) -> pd.DataFrame:
    """`events.parquet` of one or many runs (see `load_series` for the extra columns)."""
    return _load_table(runs, "events.parquet", EVENT_COLUMNS)


def load_requests(runs: RunsArg) -> pd.DataFrame:
    """`requests.parquet` of one or many runs (see `load_series` for the extra columns)."""
    return _load_table(runs, "requests.parquet", REQUEST_COLUMNS)


def override_value(row: pd.Series, key: str) -> Any:
    """What one run (a row of `load_runs`) was asked for under an override key: its
    recorded Hydra override first, else the column of that name or the config choice the
    key selects (`engine/guard` -> `guard`), so defaults never overridden still show."""
    key = key.strip().lstrip("+~")
    recorded = row.get("overrides")
    if isinstance(recorded, dict) and key in recorded:
        return recorded[key]
    for col in (key, key.split("/")[-1]):
        if col in row.index:
            return row[col]
    return None


def with_overrides(runs: pd.DataFrame, keys: str | Iterable[str]) -> pd.DataFrame:
    """A copy of `runs` with one string column per override key, named as written
    (`faults.pool.tokens`, `engine/guard`), so sweeps over knobs that are not config
    choices can be grouped, plotted and compared like choices. Keys that already are
    columns (`pp`, `guard`) are left as they are."""
    keys = [keys] if isinstance(keys, str) else list(keys)
    df = runs.copy()
    for key in keys:
        if key in df.columns:
            continue
        values = [override_value(row, key) for _, row in df.iterrows()]
        df[key] = pd.Series(
            [None if v is None or pd.isna(v) else str(v) for v in values],
            index=df.index,
            dtype="object",
        )
    return df
