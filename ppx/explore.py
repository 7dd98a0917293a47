"""Entry point: `python -m ppx.explore +exp=... explore.strategy=pct explore.schedules=500`.

Same config tree as `python -m ppx.run` (the run always uses the sim transport); writes
`explore.parquet` (schedule, verdict, reason, cycle, tokens, served, steps, virtual_s),
`summary.json` (fractions per verdict) and `failures/<n>/schedule.txt` for the first failure
of each distinct verdict / cycle, with the command that replays it.
"""

from __future__ import annotations

import json
import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from ppx.config import ConfigError
from ppx.engine.transport.registry import SIM
from ppx.validation import validate


@hydra.main(config_path="../conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    with open_dict(cfg):
        cfg.engine.transport = SIM  # the explorer only runs the simulator
    try:
        cfg = validate(cfg)
        if cfg.explore.strategy == "replay":
            raise ConfigError("explore.strategy=replay: replay one schedule with python -m ppx.run")
    except ConfigError as e:
        print(f"ppx: config error: {e}", file=sys.stderr)
        sys.exit(2)
    from ppx.sim.explore import explore, summary_of

    hc = HydraConfig.get()
    out_dir = hc.runtime.output_dir
    os.makedirs(out_dir, exist_ok=True)
    overrides = list(hc.overrides.task)
    ex = explore(cfg, out_dir, overrides)
    ex.table.to_parquet(os.path.join(out_dir, "explore.parquet"), index=False)
    s = summary_of(ex, cfg, hc.runtime.choices.get("exp"))
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(s, f, indent=1, default=str)
    line = f"ppx.explore: {s['reason']} in {s['wall_s']}s ({s['schedules_per_s']} schedules/s)"
    if s["dfs_exhausted"] is not None:
        line += f"; dfs covered {s['dfs_covered']} schedules, tree exhausted={s['dfs_exhausted']}"
    print(line + f"\nppx.explore: table {os.path.join(out_dir, 'explore.parquet')}", flush=True)


if __name__ == "__main__":
    main()
