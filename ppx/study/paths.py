"""Where study files live: --experiments, $PPX_EXPERIMENTS, ./experiments, the repository's."""

from __future__ import annotations

import os
from pathlib import Path


def experiments_dirs(extra: str | os.PathLike | None = None) -> list[Path]:
    """Where study files are looked up, first hit wins: --experiments, $PPX_EXPERIMENTS,
    ./experiments, then the repository's experiments/ next to the ppx package."""
    dirs = [Path(extra)] if extra else []
    if os.environ.get("PPX_EXPERIMENTS"):
        dirs.append(Path(os.environ["PPX_EXPERIMENTS"]))
    dirs.append(Path.cwd() / "experiments")
    dirs.append(Path(__file__).resolve().parents[2] / "experiments")
    return dirs


def find_study(name: str, experiments: str | os.PathLike | None = None) -> Path:
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml") and candidate.exists():
        return candidate
    tried = []
    for d in experiments_dirs(experiments):
        for suffix in (".yaml", ".yml"):
            path = d / f"{name}{suffix}"
            tried.append(str(path))
            if path.exists():
                return path
    raise FileNotFoundError(f"no study named {name!r}; looked for: {', '.join(tried)}")
