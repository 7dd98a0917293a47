"""Keys that moved into sections when the schema was split (issue 34: no class over 15
attributes). An old key on a command line is refused in one line naming where it lives now,
before Hydra composes anything (Hydra's own message would suggest appending it with `+`)."""

from __future__ import annotations

import sys

MOVED: dict[str, str] = {
    **{f"workload.{k}": f"workload.bench.{k}" for k in (
        "input_len", "output_len", "range_ratio", "burstiness", "max_concurrency",
        "prompts_per_group",
    )},
    **{f"workload.{k}": f"workload.trace.{k}" for k in (
        "format", "window_start_s", "window_s", "time_scale", "token_scale",
    )},
    **{f"engine.{k}": f"engine.liveness.{k}" for k in (
        "livelock_passes", "stall_passes", "livelock_flips", "livelock_readmits",
    )},
    "engine.admission.prefetch_floor": "engine.admission.prefetch.floor",
    "engine.admission.prefetch_bound_ms": "engine.admission.prefetch.bound_ms",
    "engine.admission.prefetch_short": "engine.admission.prefetch.short",
    **{f"explore.{k}": f"explore.pct.{k}" for k in ("depth", "depth_cycle", "horizon")},
    **{f"explore.{k}": f"explore.dfs.{k}" for k in ("bound", "delays")},
    **{f"explore.{k}": f"explore.fanout.{k}" for k in ("workers", "ray", "shard", "shards", "batch")},
    "explore.shrink_s": "explore.shrink.scenario_s",
    "explore.step_us": "sim.step_us",
    "explore.max_steps": "sim.max_steps",
}  # fmt: skip
# a section now, where a number was: `explore.shrink=N` is `explore.shrink.runs=N`
BECAME_SECTION = {"explore.shrink": "explore.shrink.runs"}


def moved(override: str) -> str | None:
    """One line naming the new key of an override that spells an old one, else None."""
    key, eq, value = override.lstrip("+~").partition("=")
    new = MOVED.get(key) or (BECAME_SECTION.get(key) if eq and value[:1] != "{" else None)
    return None if new is None else f"{key} is now {new} ({new}={value})"


def refuse_moved(argv: list[str]) -> None:
    """Exit 2 with one line on the first old key in `argv` (a CLI's overrides)."""
    for arg in argv:
        if (why := moved(arg)) is not None:
            print(f"ppx: config error: {why}", file=sys.stderr)
            sys.exit(2)
