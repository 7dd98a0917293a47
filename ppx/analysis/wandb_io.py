"""Loading runs from Weights & Biases into the same frame shape as `load_runs`.

`wandb` is imported only inside `load_wandb`: the local run store is the primary source,
and analysis must work on a machine that has never logged in (or has no network).
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from ppx.analysis.load import runs_frame, summary_record
from ppx.analysis.schema import CHOICE_KEYS

_OFFLINE_HINT = (
    "W&B is not reachable ({why}). Runs logged offline live in each run dir's wandb/; "
    "sync them with `wandb sync <run_dir>/wandb/offline-run-*`, or analyse the local "
    "run store directly with ppx.analysis.load_runs(<sweep dir>)."
)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _choices_from(config: dict[str, Any]) -> dict[str, Any]:
    """The run's config choices: flat top-level config keys, as `telemetry.wandb_sink` logs
    them (the resolved config beside them is nested under `resolved`)."""
    return {k: config[k] for k in CHOICE_KEYS if k in config and _scalar(config[k])}


def wandb_record(run: Any) -> dict[str, Any]:
    """One W&B run (a `wandb.apis.public.Run` or anything with the same attributes) as a
    `load_runs` row. `rank<r>/<counter>` summary keys stay out, as `per_rank` does locally."""
    raw = getattr(run.summary, "_json_dict", None)
    summary = dict(raw if isinstance(raw, dict) else run.summary)
    config = dict(run.config or {})
    summary = {
        k: v for k, v in summary.items() if not k.startswith("_") and "/" not in k and _scalar(v)
    }
    summary["choices"] = _choices_from(config)
    rec = summary_record(summary)
    rec["run_id"] = rec.get("run_id") or run.id
    rec["run_dir"] = None
    rec["study"] = rec.get("study") or getattr(run, "group", None)
    rec["wandb_path"] = "/".join(run.path) if isinstance(run.path, (list, tuple)) else run.path
    rec["wandb_url"] = getattr(run, "url", None)
    rec["tags"] = ",".join(getattr(run, "tags", None) or [])
    return rec


def load_wandb(entity_project: str, filters: dict[str, Any] | None = None) -> pd.DataFrame:
    """Query `entity/project` (MongoDB-style `filters`, e.g. {"group": "ordering_matrix"})
    and return one row per run, with the columns of `load_runs` (`run_dir` is empty;
    `wandb_path`/`wandb_url`/`tags` are added)."""
    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun"):
        raise RuntimeError(_OFFLINE_HINT.format(why=f"WANDB_MODE={os.environ['WANDB_MODE']}"))
    try:
        import wandb
    except ImportError as exc:  # pragma: no cover - wandb is a project dependency
        raise ImportError("load_wandb needs the `wandb` package: pip install wandb") from exc
    try:
        api = wandb.Api()
        records = [wandb_record(run) for run in api.runs(entity_project, filters=filters or {})]
    except Exception as exc:  # the client raises many types for "no network"/"no login"
        raise RuntimeError(_OFFLINE_HINT.format(why=f"{type(exc).__name__}: {exc}")) from exc
    return runs_frame(records)
