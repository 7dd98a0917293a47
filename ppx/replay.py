"""`python -m ppx.replay FILE [--out DIR]`: a saved schedule replayed from the file alone.

A schedule's header holds the config name and overrides it was composed from, the whole
resolved config, and the run's final verdict and reason (ppx/sim/schedule.py). The replay
composes the config again from the name and overrides; if the project's defaults moved since
(the composed config's hash differs from the recorded one), it replays the recorded config
itself, and says so. The run is a full run (run store, post-mortem, W&B, its own schedule);
the exit code is 0 when it ends with the recorded verdict and reason, 1 when it does not, 2
when the file cannot be replayed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")


def compose_for(path: str, sch):
    """The config that recorded `sch`: composed again, else the recorded one; (cfg, note)."""
    from hydra import compose, initialize_config_dir

    from ppx.config_renames import migrate_overrides
    from ppx.sim.report import replay_overrides
    from ppx.sim.schedule import config_hash, recorded_config

    overrides = migrate_overrides(replay_overrides(sch.overrides))
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose(sch.config_name, [*overrides, f"explore.replay={path}"])
    if config_hash(cfg) == sch.config_hash:
        return cfg, None
    recorded = recorded_config(sch)
    if recorded is None:
        return cfg, None  # validation names the difference
    if config_hash(recorded) == config_hash(cfg):
        return (
            cfg,
            "the config schema changed since it was recorded: the same run under today's keys",
        )
    recorded.explore.replay = path
    return recorded, "the defaults moved since it was recorded: replaying the recorded config"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ppx.replay", description=__doc__.split("\n")[0])
    p.add_argument("schedule", help="a schedule.txt (a run dir's, or an explorer failure's)")
    p.add_argument("--out", help="run dir (default outputs/replay/<timestamp>)")
    args = p.parse_args(argv)
    from ppx.config import ConfigError
    from ppx.config_renames import migrate_overrides
    from ppx.sim.schedule import ScheduleError, load
    from ppx.validation import validate

    path = os.path.abspath(args.schedule)
    try:
        sch = load(path)
        cfg, note = compose_for(path, sch)
        cfg = validate(cfg)
    except (ScheduleError, ConfigError) as e:
        print(f"ppx.replay: {e}", file=sys.stderr)
        return 2
    if note:
        print(f"ppx.replay: {note}", file=sys.stderr)
    run_dir = args.out or os.path.join("outputs", "replay", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(run_dir, exist_ok=True)
    from ppx.run import execute

    exp = next((o.split("=", 1)[1] for o in sch.overrides if o.startswith("+exp=")), None)
    overrides = [*migrate_overrides(sch.overrides), f"explore.replay={path}"]
    s = execute(cfg, run_dir, exp, overrides, sch.config_name)
    same = s["verdict"] == sch.verdict and (not sch.reason or s["reason"] == sch.reason)
    print(
        f"ppx.replay: verdict={s['verdict']} (recorded {sch.verdict}) -> "
        f"{'reproduced' if same else 'DIFFERS'}"
        + (f"\nppx.replay: reason: {s['reason']}" if s["reason"] else "")
        + f"\nppx.replay: run dir {run_dir}",
        flush=True,
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
