"""Entry point: `python -m ppx.run +exp=smoke pp=3` (Hydra).

The Hydra job process is the supervisor: it validates the config (before anything is
spawned), boots the ranks, drives the workload, checks every token against the reference,
and writes the run store (summary.json, parquet files, postmortem/) and a W&B run.
"""

from __future__ import annotations

import os
import sys
import time

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ppx.config import ConfigError
from ppx.config_renames import refuse_renamed
from ppx.engine.faults.rank_faults import RunFaults
from ppx.engine.transport.registry import spec_of
from ppx.judge import judge_served
from ppx.validation import validate

WANDB_WARNING = "ppx: warning: W&B logging failed (the run store is complete): "


def check_tokens(cfg, driver) -> list:
    from ppx.oracle import Oracle, sample_rids

    oracle = Oracle.for_config(cfg)
    served = [r.req.rid for r in driver.records.values() if r.outcome == "served"]
    checked = set(sample_rids(served, float(cfg.oracle.sample), int(cfg.seed)))
    driver.oracle_checked = len(checked)
    bad = []
    for rec in driver.records.values():
        if rec.req.rid in checked:
            found = oracle.check(rec.req.prompt, rec.output, rec.req.rid)
            if found:
                rec.outcome, rec.reason = "mismatch", str(found[0])
                bad += found
    return bad


def execute(
    cfg: DictConfig,
    run_dir: str,
    exp: str | None,
    overrides: list[str] | None = None,
    config_name: str = "config",
) -> dict:
    from ppx.telemetry import store, summary, wandb_sink

    resolved = OmegaConf.to_container(cfg, resolve=True)
    t0 = time.time()
    simulated = spec_of(cfg).simulated
    if simulated:
        from ppx.sim.world import SimSupervisor

        sup = SimSupervisor(cfg, run_dir)
    else:
        from ppx.supervisor import Supervisor

        sup = Supervisor(cfg, run_dir)
    outcome = sup.run()
    mismatches = check_tokens(cfg, sup.driver)
    outcome["verdict"], outcome["reason"] = judge_served(
        outcome["verdict"], outcome["reason"], mismatches, sup.tally.reports
    )
    if simulated:  # every simulated run can be replayed exactly, from its file alone
        from ppx.sim.schedule import save_run

        outcome["schedule"] = save_run(
            run_dir, cfg, overrides or [], sup, outcome["verdict"], outcome["reason"], config_name
        )
    extra = {k: outcome[k] for k in ("sim", "schedule") if k in outcome}
    extra["oracle_checked"] = getattr(sup.driver, "oracle_checked", 0)
    extra.update(sup.driver.wl.loader_counts())  # a trace's malformed and skipped rows
    s = summary.build(
        cfg,
        exp,
        run_dir,
        outcome,
        sup.driver,
        sup.tally.reports,
        mismatches,
        time.time() - t0,
        extra,
    )
    events = summary.collect_events(run_dir, int(cfg.pp))
    if outcome["verdict"] != "served":  # the supervisor's own event: how the run ended
        events.append(
            {
                # the run's own clock: virtual time on sim, so a replay's events are identical
                "t_s": round(outcome["sim"]["virtual_s"] if "sim" in outcome else s["wall_s"], 6),
                "rank": -1,
                "kind": outcome["verdict"],
                "pass_id": -1,
                "slot": -1,
                "rid": -1,
                "epoch": 0,
                "detail": s.get("cycle") or outcome["reason"],
            }
        )
    store.write_run(run_dir, s, sup.tally.metrics, events, summary.request_rows(sup.driver))
    try:
        wandb_sink.log_run(cfg, run_dir, s, sup.tally.metrics, events, resolved)
    except Exception as e:  # the store is the source of truth: W&B trouble is one warning
        # line (tests assert its absence on every logged run), never fatal and never silent
        print(f"{WANDB_WARNING}{type(e).__name__}: {e}", file=sys.stderr, flush=True)
    return s


def triton_cpu_notice(cfg) -> str | None:
    """Said before the run starts: triton on a CPU means the interpreter, which runs each
    kernel program in Python; `+exp=triton_cpu` is the run it serves in seconds (measured in
    docs/models.md)."""
    from ppx.engine.kernels.registry import KERNELS

    if not KERNELS.of(cfg).interpreted_on_cpu or str(cfg.device) != "cpu":
        return None
    return (
        "ppx: engine/kernels=triton on cpu runs under the triton interpreter "
        "(TRITON_INTERPRET=1), 100x or more slower per pass than engine/kernels=torch; "
        "use +exp=triton_cpu (model=interp, 4 short requests), which serves in seconds"
    )


@hydra.main(config_path="../conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    try:
        cfg = validate(cfg)
    except ConfigError as e:
        print(f"ppx: config error: {e}", file=sys.stderr)
        sys.exit(2)
    notice = triton_cpu_notice(cfg)
    if notice:
        print(notice, file=sys.stderr, flush=True)
    hc = HydraConfig.get()
    run_dir = hc.runtime.output_dir
    exp = hc.runtime.choices.get("exp")
    os.makedirs(run_dir, exist_ok=True)
    from ppx.launch.store import torchrun_env

    env = torchrun_env()  # one rank per torchrun worker; global rank 0 supervises
    if env is not None:
        problem = None
        if env.world != int(cfg.pp) or spec_of(cfg).simulated:
            problem = (
                f"torchrun started {env.world} workers for pp={cfg.pp} (engine.transport="
                f"{cfg.engine.transport}); one worker per rank, gloo or nccl"
            )
        elif (kill := RunFaults(cfg).kill(env.world)) is not None and kill[0] > 0:
            problem = f"faults.kill.rank={kill[0]} under torchrun: only rank 0 is local"
        if problem:
            print(f"ppx: config error: {problem}", file=sys.stderr)
            sys.exit(2)
        if env.rank != 0:
            from ppx.launch.node import serve_node

            sys.exit(serve_node(cfg, run_dir, env))
    s = execute(cfg, run_dir, exp, list(hc.overrides.task), hc.job.config_name)
    line = (
        f"ppx: verdict={s['verdict']} served={s['served']}/{s['submitted']} refused={s['refused']} "
        f"lost={s['lost']} out_tok_s={s['out_tok_s']} oracle_mismatches={s['oracle_mismatches']} "
        f"ledger_violations={s['ledger_violations']} cached_tokens={s['cached_tokens']}"
    )
    if s.get("cycle"):
        line += f"\nppx: cycle: {s['cycle']}"
    if s["reason"]:
        line += f"\nppx: reason: {s['reason']}"
    if s.get("schedule"):
        line += f"\nppx: schedule {s['schedule']} (replay: python -m ppx.replay {s['schedule']})"
    print(line + f"\nppx: run dir {run_dir}", flush=True)
    if hc.mode != RunMode.MULTIRUN and s["verdict"] != "served":
        sys.exit(1)


if __name__ == "__main__":
    refuse_renamed()
    main()
