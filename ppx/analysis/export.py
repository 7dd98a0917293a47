"""Writing figures and tables next to a notebook or study, only when asked to.

Both helpers are no-ops for `out_dir=None`, so a notebook calls them unconditionally and
its parameters cell alone decides whether files are written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure


def _target(out_dir: str | os.PathLike, name: str, suffix: str) -> Path:
    path = Path(out_dir) / (name if name.endswith(suffix) else f"{name}{suffix}")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def save_figure(fig: Figure, out_dir: str | os.PathLike | None, name: str) -> Path | None:
    """Save `fig` as `out_dir/name.png` (no-op when `out_dir` is None)."""
    if out_dir is None:
        return None
    path = _target(out_dir, name, ".png")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path


def save_table(df: pd.DataFrame, out_dir: str | os.PathLike | None, name: str) -> Path | None:
    """Save `df` as `out_dir/name.csv` (no-op when `out_dir` is None); dict/list cells
    such as `overrides` are written as their text form."""
    if out_dir is None:
        return None
    path = _target(out_dir, name, ".csv")
    df.to_csv(path, index=False)
    return path
