"""Schedule files: the choices of one simulated run, tied to the config that made them.

A schedule is the list of (chosen task, runnable set) at every choice point plus a hash of
the composed config; replaying it under another config, or from a cut file, is refused up
front, and a replay that meets a different choice point ends with verdict `mismatch`.

The header also holds what replaying needs with nothing else (`python -m ppx.replay FILE`):
the config name and overrides it was composed from, the whole resolved config, and the run's
final verdict and reason -- the oracle's included (a served run with a wrong token is
`mismatch` here too, as in its summary.json).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from omegaconf import OmegaConf

MAGIC = "ppx-schedule 1"  # version 1 files had no config, config_name or reason line
OPTIONAL = ("config_name", "reason", "config")  # header lines after `verdict`, when present
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
    config_name: str = "config"  # conf/<name>.yaml it was composed from (explorer: "explorer")
    config: dict | None = None  # the whole resolved config
    reason: str = ""


def resolved_config(cfg) -> dict:
    return OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)


def config_hash(cfg) -> str:
    d = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)
    clock = (d.get("explore") or {}).get("clock", "step")
    d = {k: v for k, v in d.items() if k not in NOT_HASHED}
    if clock != "step":  # the idle clock runs another schedule space (hashes of step runs
        d["sim_clock"] = clock  # stay what they were)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def upgraded(recorded: dict):
    """A recorded config under today's schema: moved keys at their new paths
    (ppx/config_renames.py), fields added since at their defaults (a new field's default is the
    behaviour before it existed). A key the schema no longer has is a ScheduleError."""
    from omegaconf.errors import ConfigKeyError

    from ppx.config import PPXConfig
    from ppx.config_renames import migrate_config

    try:
        return OmegaConf.merge(OmegaConf.structured(PPXConfig), migrate_config(recorded))
    except ConfigKeyError as e:
        raise ScheduleError(f"recorded for a config key ppx no longer has ({e.msg})") from None


def recorded_config(s: Schedule):
    """The config `s` was recorded under, upgraded to today's schema; None when the file holds
    none, or holds one that is not what its hash was taken of (an edited file)."""
    if s.config is None or config_hash(s.config) != s.config_hash:
        return None
    return upgraded(s.config)


def recorded_for(s: Schedule, cfg) -> bool:
    """Whether `cfg` runs what `s` was recorded under: the same hash, or the same hash as the
    recorded config upgraded to today's schema (a key moved or added since)."""
    want = config_hash(cfg)
    if want == s.config_hash:
        return True
    recorded = recorded_config(s)
    return recorded is not None and config_hash(recorded) == want


def save(path: str, s: Schedule) -> None:
    lines = [
        MAGIC,
        f"config_hash {s.config_hash}",
        f"overrides {json.dumps(s.overrides)}",
        f"strategy {s.strategy} seed {s.seed}",
        f"verdict {s.verdict}",
        f"config_name {s.config_name}",
        f"reason {json.dumps(s.reason)}",
        f"config {json.dumps(s.config, sort_keys=True, default=str)}",
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
        at = lines.index(next(x for x in lines if x.startswith("choices ")))
        head = dict(line.split(" ", 1) for line in lines[1 : at + 1])
        strategy, _, seed = head["strategy"].split(" ")
        n = int(head["choices"])
        body = " ".join(lines[at + 1 : -1]).split()
        choices = [(int(t), int(m, 16)) for t, m in (c.split(":") for c in body)]
        overrides = json.loads(head["overrides"])
        extra = {
            "config_name": head.get("config_name", "config"),
            "reason": json.loads(head.get("reason", '""')),
            "config": json.loads(head.get("config", "null")),
        }
    except (KeyError, ValueError, StopIteration) as e:
        raise ScheduleError(f"{where}: malformed header or choices ({e})") from None
    if lines[-1] != "end" or len(choices) != n:
        raise ScheduleError(
            f"{where}: truncated: {len(choices)} of {n} choices"
            + ("" if lines[-1] == "end" else ", no end line")
        )
    return Schedule(
        head["config_hash"], overrides, strategy, int(seed), head["verdict"], choices, **extra
    )


def save_run(
    run_dir: str, cfg, overrides: list[str], sup, verdict: str, reason: str, config_name: str
) -> str:
    """Save a simulated run's schedule as `schedule.txt` in its run dir (with its final
    verdict: called after the oracle has judged the tokens); returns the path."""
    import os

    x = cfg.explore
    path = os.path.join(run_dir, "schedule.txt")
    kept = [o for o in overrides if not o.startswith(("explore.replay=", "explore.strategy="))]
    head = dict(config_name=config_name, config=resolved_config(cfg), reason=reason)
    save(
        path,
        Schedule(
            config_hash(cfg), kept, str(x.strategy), int(x.seed), verdict, sup.sched.choices, **head
        ),
    )
    return path
