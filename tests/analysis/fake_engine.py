"""A stand-in for `python -m ppx.run -m ...` that writes fake runs the way Hydra lays out a
multirun, so the study runner's subprocess and progress path is tested without the engine.

Usage (what the study runner calls via PPX_STUDY_RUN_CMD):
    python fake_engine.py -m hydra/launcher=joblib hydra.sweep.dir=DIR a=1,2 b=x
A cell with `faults=crash` starts (writes .hydra/) but never writes summary.json and makes
the command exit 1, like a job that raised.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_runs import write_run  # noqa: E402


def main(argv: list[str]) -> int:
    sweep_dir, subdir, group = None, None, None
    fixed: list[str] = []
    swept: list[list[str]] = []
    for arg in argv:
        if arg == "-m" or arg.startswith(("hydra/launcher=", "hydra.launcher.")):
            continue
        key, _, value = arg.partition("=")
        if key == "hydra.sweep.dir":
            sweep_dir = Path(value)
        elif key == "hydra.sweep.subdir":
            subdir = value
        elif key.lstrip("+") == "logger.group":
            group = value.strip("'")
        elif "," in value and not value.startswith(("'", "[")):
            swept.append([f"{key}={v}" for v in value.split(",")])
        else:
            fixed.append(arg)
    if sweep_dir is None:
        print("fake_engine: hydra.sweep.dir is required", file=sys.stderr)
        return 2
    delay = float(os.environ.get("FAKE_ENGINE_DELAY", "0"))
    failed = False
    for num, combo in enumerate(itertools.product(*swept)):
        overrides = fixed + list(combo)
        job = sweep_dir / (subdir if subdir is not None else str(num))
        if "faults=crash" in overrides:
            (job / ".hydra").mkdir(parents=True, exist_ok=True)
            (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
            failed = True
            continue
        write_run(job, overrides, study=group, n_requests=8)
        time.sleep(delay)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
