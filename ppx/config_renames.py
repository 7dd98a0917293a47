"""Config keys that moved, old dotted path -> new, and what follows from a move.

A key moves when a schema section is split (a class past 15 fields, issue #34). Two things
must keep working for the people who wrote the old name down:
- a saved schedule replays (`python -m ppx.replay FILE`): its overrides and its recorded
  config are rewritten to the new paths before they are composed or merged;
- a command line, study cell or preset that still says the old key is refused in one line
  that names the new one, before Hydra's multi-line "not in struct" and before any spawn.
A move is one line in `RENAMED`; nothing else in ppx spells an old path.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterable

from ppx.fault_sections import fault_key_problem

RENAMED: dict[str, str] = {
    # issue 32: one typed section per fault (ppx/fault_sections.py, ppx/engine/faults/)
    "faults.delay_kind": "faults.delay.kind",
    "faults.delay_rank": "faults.delay.rank",
    "faults.delay_s": "faults.delay.s",
    "faults.lose_rank": "faults.lose.rank",
    "faults.lose_kind": "faults.lose.kind",
    "faults.lose_seq": "faults.lose.seq",
    "faults.drop_void_output": "faults.drop_void_output.enabled",
    "faults.corrupt_rank": "faults.corrupt.rank",
    "faults.corrupt_rid": "faults.corrupt.rid",
    "faults.corrupt_position": "faults.corrupt.position",
    "faults.kill_rank": "faults.kill.rank",
    "faults.kill_after_s": "faults.kill.after_s",
    "faults.pool_rank": "faults.pool.rank",
    "faults.pool_tokens": "faults.pool.tokens",
    "faults.lifo_rank": "faults.lifo.rank",
    "faults.epoch_desync_rank": "faults.epoch_desync.rank",
    "faults.offer_flap": "faults.offer_flap.tokens",
    "faults.retract_rid": "faults.retract.rid",
    "faults.retract_redeliver": "faults.retract.redeliver",
    "faults.match_cap": "faults.match_cap.tokens",
    "faults.drop_rank": "faults.cache_drop.rank",
    "faults.drop_pass": "faults.cache_drop.after_pass",
    # issue 34's split of the schema's widest sections
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
    **{f"explore.{k}": f"explore.fanout.{k}" for k in (
        "workers", "ray", "shard", "shards", "batch",
    )},
    "explore.cache": "explore.exhaustive.cache",
    "explore.liveness": "explore.exhaustive.liveness",
    "explore.shrink": "explore.shrinker.runs",
    "explore.shrink_s": "explore.shrinker.scenario_s",
    "explore.step_us": "sim.step_us",
    "explore.max_steps": "sim.max_steps",
}  # fmt: skip
# keys removed with nothing in their place (no run read them): a recorded config drops them
DROPPED: tuple[str, ...] = ("explore.name",)


def _split(override: str) -> tuple[str, str, str] | None:
    """(prefix, key, rest) of a `key=value` override (`+`/`++`/`~` prefixes kept); None for
    a group choice (`engine/guard=rid`) or a bare flag."""
    key, eq, value = override.partition("=")
    stripped = key.lstrip("+~")
    if not eq and not key.startswith("~"):
        return None
    if "/" in stripped:
        return None
    return key[: len(key) - len(stripped)], stripped, f"{eq}{value}"


def moved(key: str) -> str | None:
    """The new path of `key`, or of the section it lies under; None when it did not move."""
    for old, new in RENAMED.items():
        if new.startswith(old + ".") and key.startswith(old + "."):
            continue  # a leaf that became a section (faults.offer_flap): already its new path
        if key == old or key.startswith(old + "."):
            return new + key[len(old) :]
    return None


def _rewritten(override: str) -> tuple[str, str, str] | None:
    """(old key, new key, the override at the new key) for an override that says a moved
    key; None for any other."""
    parts = _split(override)
    new = moved(parts[1]) if parts else None
    if parts is None or new is None:
        return None
    return parts[1], new, f"{parts[0]}{new}{parts[2]}"


def migrate_overrides(overrides: Iterable[str]) -> list[str]:
    """The overrides with every moved key written at its new path."""
    return [r[2] if (r := _rewritten(o)) else o for o in overrides]


def _parent(tree: dict, path: list[str]) -> dict | None:
    """The dict at `path` in nested dicts, or None."""
    node = tree
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def migrate_config(config: dict) -> dict:
    """A copy of a resolved config (nested dicts) with every moved key at its new path and
    every dropped key gone."""
    out = copy.deepcopy(config)
    for key in DROPPED:
        *head, leaf = key.split(".")
        if (parent := _parent(out, head)) is not None:
            parent.pop(leaf, None)
    for old, new in RENAMED.items():
        *head, leaf = old.split(".")
        parent = _parent(out, head)
        if parent is None or leaf not in parent:
            continue
        if new.startswith(old + ".") and isinstance(parent[leaf], dict):
            continue  # a leaf that became a section, recorded as the section already
        value = parent.pop(leaf)
        *new_head, new_leaf = new.split(".")
        target = out
        for part in new_head:
            target = target.setdefault(part, {})
        target[new_leaf] = value
    return out


def renamed_problem(overrides: Iterable[str]) -> str | None:
    """One line naming the first override that uses a moved key, or None."""
    for o in overrides:
        if (r := _rewritten(o)) is not None:
            old, new, written = r
            return f"{old} was renamed {new}: write {written}"
    return None


def _fault_problem(overrides: Iterable[str]) -> str | None:
    """One line naming the first override of a fault or fault field the schema has not."""
    for o in overrides:
        parts = _split(o)
        if parts is not None and (problem := fault_key_problem(parts[1])) is not None:
            return problem
    return None


def refuse_renamed(argv: list[str] | None = None, prog: str = "ppx") -> None:
    """Exit 2 with one line when a command line says a moved key, or a fault or fault field
    the schema has not (before Hydra parses it)."""
    args = [a for a in (sys.argv[1:] if argv is None else argv) if "=" in a]
    problem = renamed_problem(args) or _fault_problem(args)
    if problem:
        print(f"{prog}: config error: {problem}", file=sys.stderr)
        sys.exit(2)
