"""Schedule files: the choices of one simulated run, tied to the config that made them.

A schedule is the list of (chosen task, runnable set) at every choice point plus a hash of
the composed config; replaying it under another config, or from a cut file, is refused up
front, and a replay that meets a different choice point ends with verdict `mismatch`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from omegaconf import OmegaConf

MAGIC = "ppx-schedule 1"
PER_LINE = 32
# keys that do not change what runs: where it is logged, how it is explored
NOT_HASHED = ("explore", "logger")


class ScheduleError(ValueError):
    pass


@dataclass
class Schedule:
    config_hash: str
    overrides: list[str]
    strategy: str
    seed: int
    verdict: str
    choices: list[tuple[int, int]]  # (chosen task id, bitmask of the runnable task ids)


def config_hash(cfg) -> str:
    d = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)
    clock = (d.get("explore") or {}).get("clock", "step")
    d = {k: v for k, v in d.items() if k not in NOT_HASHED}
    if clock != "step":  # the idle clock runs another schedule space (hashes of step runs
        d["sim_clock"] = clock  # stay what they were)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def save(path: str, s: Schedule) -> None:
    lines = [
        MAGIC,
        f"config_hash {s.config_hash}",
        f"overrides {json.dumps(s.overrides)}",
        f"strategy {s.strategy} seed {s.seed}",
        f"verdict {s.verdict}",
        f"choices {len(s.choices)}",
    ]
    cs = [f"{t}:{m:x}" for t, m in s.choices]
    lines += [" ".join(cs[i : i + PER_LINE]) for i in range(0, len(cs), PER_LINE)]
    lines.append("end")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def load(path: str) -> Schedule:
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ScheduleError(f"explore.replay={path}: cannot read it ({e.strerror})") from None
    where = f"explore.replay={path}"
    if not lines or lines[0] != MAGIC:
        raise ScheduleError(f"{where}: not a ppx schedule (first line should be {MAGIC!r})")
    try:
        head = dict(line.split(" ", 1) for line in lines[1:6])
        strategy, _, seed = head["strategy"].split(" ")
        n = int(head["choices"])
        body = " ".join(lines[6:-1]).split()
        choices = [(int(t), int(m, 16)) for t, m in (c.split(":") for c in body)]
        overrides = json.loads(head["overrides"])
    except (KeyError, ValueError) as e:
        raise ScheduleError(f"{where}: malformed header or choices ({e})") from None
    if lines[-1] != "end" or len(choices) != n:
        raise ScheduleError(
            f"{where}: truncated: {len(choices)} of {n} choices"
            + ("" if lines[-1] == "end" else ", no end line")
        )
    return Schedule(head["config_hash"], overrides, strategy, int(seed), head["verdict"], choices)


def save_run(run_dir: str, cfg, overrides: list[str], sup, verdict: str) -> str:
    """Save a simulated run's schedule as `schedule.txt` in its run dir; returns the path."""
    import os

    x = cfg.explore
    path = os.path.join(run_dir, "schedule.txt")
    kept = [o for o in overrides if not o.startswith(("explore.replay=", "explore.strategy="))]
    save(
        path,
        Schedule(config_hash(cfg), kept, str(x.strategy), int(x.seed), verdict, sup.sched.choices),
    )
    return path
