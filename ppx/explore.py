"""Entry point: `python -m ppx.explore +exp=... explore.strategy=pct explore.schedules=500`.

Same config tree as `python -m ppx.run`, from conf/explorer.yaml: the hash model and a small
load by default (the run always uses the sim transport). Writes `explore.parquet` (a row per
schedule), `summary.json` (schedules, wall_s, schedules_per_s, verdicts, tokens_checked,
failures, fractions per verdict) and, for the first failure of each distinct verdict /
cycle, `failures/<n>/schedule.txt` (shrunk) and `original.txt`, with the command that
replays it. `explore.fanout.workers=N` fans the schedules out over N local processes; a Hydra
multirun over `explore.fanout.shard` (with `explore.fanout.shards`) runs them as launcher jobs and merges.
"""

from __future__ import annotations

import os
import sys
import time

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from ppx.config import ConfigError
from ppx.config_renames import refuse_renamed
from ppx.engine.transport.registry import SIM
from ppx.sim.registry import strategy_of
from ppx.validation import validate


@hydra.main(config_path="../conf", config_name="explorer", version_base=None)
def main(cfg: DictConfig) -> None:
    with open_dict(cfg):
        cfg.engine.transport = SIM  # the explorer only runs the simulator
    try:
        cfg = validate(cfg)
        if not strategy_of(cfg.explore).explores:
            raise ConfigError("explore.strategy=replay: replay one schedule with python -m ppx.run")
    except ConfigError as e:
        print(f"ppx: config error: {e}", file=sys.stderr)
        sys.exit(2)
    from ppx.sim.explore import explore, summary_of
    from ppx.sim.report import write_summary
    from ppx.sim.schedule import config_hash
    from ppx.sim.timing import polls_the_clock

    if str(cfg.explore.clock) == "idle" and polls_the_clock(cfg):
        print(
            "ppx.explore: note: explore.clock=idle with engine.kv.host_tier: a host load is "
            "polled, and the idle clock moves only when no task can run, so it lands only when "
            "every rank parks (expect stalled ends where it would have landed); "
            "explore.clock=step or faults.timing=choice lands it (docs/simulation.md)",
            flush=True,
        )

    hc = HydraConfig.get()
    out_dir = hc.runtime.output_dir
    overrides = list(hc.overrides.task)
    t_start = time.time()
    if int(cfg.explore.scenarios) > 0:  # the explorer draws its own scenarios (scenarios.py)
        cfg, added = _design(cfg, overrides, hc.job.config_name)
        _scenarios(cfg, out_dir, [*overrides, *added], hc.job.config_name, added)
        return
    ex = explore(cfg, out_dir, overrides, config_name=hc.job.config_name)
    s = summary_of(ex, cfg, hc.runtime.choices.get("exp"))
    # what a launcher's merge needs from each job (fanout.MergeShards)
    s |= {
        "shard": int(cfg.explore.fanout.shard),
        "overrides": overrides,
        "config_name": hc.job.config_name,
        "config_hash": config_hash(cfg),
        "t_start": t_start,
        "t_end": time.time(),
    }
    write_summary(os.path.join(out_dir, "summary.json"), s)
    log_to_wandb(cfg, out_dir, s, ex, overrides, hc.job.config_name)
    line = f"ppx.explore: {s['reason']} in {s['wall_s']}s ({s['schedules_per_s']} schedules/s)"
    line += f"; {s['tokens_checked']} tokens checked by the oracle"
    if ex.dfs is not None:
        d = ex.dfs
        line += (
            f"; dfs: {d['runs']} schedules run, {d['blocked'] + d['skipped']} pruned "
            f"({d['blocked']} cut runs, {d['skipped']} sleeping choices), "
            f"tree exhausted={d['exhausted']}"
        )
    print(line + f"\nppx.explore: table {os.path.join(out_dir, 'explore.parquet')}", flush=True)


def _design(cfg, overrides: list[str], config_name: str) -> tuple[DictConfig, list[str]]:
    """The config a scenario exploration searches, and the design overrides it added: where
    the researcher named no design, scenario_design.DEFAULT_DESIGN (ppx/sim/scenario_design.py)."""
    from hydra import compose

    from ppx.sim.scenario_design import default_design

    added = default_design(cfg, overrides, compose(config_name=config_name))
    if not added:
        return cfg, []
    # composed again by Hydra: a design is a choice of config groups, not a dotlist merge
    again = compose(config_name=config_name, overrides=[*overrides, *added])
    with open_dict(again):
        again.engine.transport = SIM
    try:
        again = validate(again)
    except ConfigError as e:
        print(
            f"ppx: config error: {e} (with the default design {' '.join(added)})",
            file=sys.stderr,
        )
        sys.exit(2)
    print(
        f"ppx.explore: no design named: exploring the default design ({' '.join(added)}); "
        "name engine/admission (e.g. engine/admission=rank_local) to explore another",
        flush=True,
    )
    return again, added


def _scenarios(cfg, out_dir: str, overrides: list[str], config_name: str, added: list[str]) -> None:
    from ppx.sim.report import write_summary
    from ppx.sim.scenarios import explore_scenarios

    s = explore_scenarios(cfg, out_dir, overrides, print, config_name)
    s["design_default"] = added
    write_summary(os.path.join(out_dir, "summary.json"), s)
    print(f"ppx.explore: {s['reason']} in {s['wall_s']}s", flush=True)
    print("\n".join(coverage_lines(s)), flush=True)


def coverage_lines(s: dict) -> list[str]:
    """What a scenario exploration ran: each group's scenarios, the groups the design cannot
    fire (and why), and the groups it has that never fired."""
    groups = ", ".join(f"{k} {v}" for k, v in s["mechanism_groups"].items())
    lines = [f"ppx.explore: mechanisms (scenarios fired in): {groups}"]
    lines += [
        f"ppx.explore: absent from the design: {group} ({why})"
        for group, why in s["mechanisms_absent"].items()
    ]
    if s["mechanisms_missing"]:
        missing = ", ".join(s["mechanisms_missing"])
        lines.append(f"ppx.explore: never fired (the design has them): {missing}")
    return lines


def log_to_wandb(cfg, out_dir: str, s: dict, ex, overrides: list[str], config_name: str) -> None:
    """The exploration as a W&B run (job_type explore), its failures with replay commands."""
    from ppx.run import WANDB_WARNING
    from ppx.sim.report import replay_command
    from ppx.telemetry.wandb_sink import log_explore

    failures = [
        {"failure": key, "verdict": f.verdict, "schedule": f.index, "strategy": f.strategy,
         "replay": replay_command(overrides, ex.paths[key], config_name)}
        for key, f in ex.failures.items() if key in ex.paths
    ]  # fmt: skip
    try:
        log_explore(cfg, out_dir, s, failures)
    except Exception as e:  # the table and summary.json are the record: W&B trouble warns
        print(f"{WANDB_WARNING}{type(e).__name__}: {e}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    refuse_renamed(prog="ppx.explore")
    main()
