"""W&B sink: one run per engine boot or exploration, offline by default, finished in a
`finally`. `job_type` says the kind of run (run, explore, replay, study), `group` the study
(else the experiment); a run that did not serve carries its post-mortem page as an artifact.

The run is opened after the engine has stopped, so W&B's own service process never competes
with the ranks for the CPU, and `wandb.teardown()` makes sure it does not outlive the run.

Shape (what `ppx.analysis.load_wandb` reads back): the config choices are flat top-level
config keys (`admission`, `ordering`, `guard`, `workload`, `exp`, ...: what a W&B user groups
and filters by) with the whole resolved config under `resolved`; the summary holds every
scalar of summary.json under its own name (`verdict`, `flips`, `voids`, ...) plus
`rank<r>/<counter>`; the history holds the group series as `group/<column>` (`group/t_s` the run's clock), so
no series' last value lands in the summary under a summary.json name.
"""

from __future__ import annotations

import os

from ppx.telemetry.store import METRIC_COLUMNS


def wandb_config(summary: dict, resolved: dict) -> dict:
    """The choices flat (W&B groups runs by top-level config keys), the full config nested."""
    return {**summary.get("choices", {}), "resolved": resolved}


def tag_choices(choices: dict) -> dict:
    """What a run is tagged with: its shape and every protocol switch away from its default
    (all of them are flat config keys too; tags are for reading a run list at a glance)."""
    from ppx.protocol.registry import AXES
    from ppx.telemetry.summary import RUN_KEYS

    moved = {
        axis.choice
        for axis, _ in AXES.values()
        if choices.get(axis.choice, axis.default) != axis.default
    }
    return {k: v for k, v in choices.items() if k != "seed" and (k in RUN_KEYS or k in moved)}


def wandb_summary(summary: dict) -> dict:
    """summary.json's scalars under their own names, and the per-rank counters flattened."""
    out = {k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool)) or v is None}
    for k, per in summary.get("per_rank", {}).items():
        for r, v in enumerate(per):
            out[f"rank{r}/{k}"] = v
    return out


JOB_TYPES = ("run", "explore", "replay", "study")


def job_type(cfg, summary: dict) -> str:
    """What kind of run this is, W&B's `job_type` (filter a project's runs by it): a run of
    a study sweep, the replay of a saved schedule, or a plain run (the explorer: explore)."""
    if summary.get("study"):
        return "study"
    explore = cfg.get("explore") if hasattr(cfg, "get") else None
    if explore is not None and explore.get("replay"):
        return "replay"
    return "run"


def _enabled(cfg) -> bool:
    lg = cfg.logger
    return not (lg.name == "none" or lg.mode == "disabled")


def _init(cfg, run_dir: str, summary: dict, config: dict, kind: str):
    """One W&B run; group = the study (one group per study), else the experiment."""
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    lg, choices = cfg.logger, summary.get("choices", {})
    tags = [f"{k}={v}" for k, v in tag_choices(choices).items()] + list(lg.tags or [])
    return wandb.init(
        project=lg.project,
        entity=lg.entity,
        mode=lg.mode,
        dir=run_dir,
        group=lg.group or summary.get("study") or choices.get("exp") or "adhoc",
        job_type=kind,
        config=config,
        tags=[t[:64] for t in tags],
        name=os.path.basename(run_dir.rstrip("/")),
        settings=wandb.Settings(console="off", x_disable_stats=True),
    )


def attach_postmortem(run, run_dir: str) -> None:
    """The post-mortem page (python -m ppx.postmortem) as an artifact of type `postmortem`,
    with the Flight Recorder dumps beside it."""
    import wandb

    from ppx.postmortem.page import write_page

    page = write_page(run_dir)
    art = wandb.Artifact(f"postmortem-{run.id}", type="postmortem")
    art.add_file(page, name="postmortem.html")
    fr = os.path.join(run_dir, "postmortem", "flight_recorder")
    if os.path.isdir(fr):
        art.add_dir(fr, name="flight_recorder")
    run.log_artifact(art)


def log_run(
    cfg, run_dir: str, summary: dict, metrics: list[dict], events: list[dict], resolved: dict
) -> str | None:
    if not _enabled(cfg):
        return None
    import wandb

    run = None
    try:
        run = _init(cfg, run_dir, summary, wandb_config(summary, resolved), job_type(cfg, summary))
        for row in metrics:
            if row["rank"] == -1:
                run.log(
                    {
                        f"group/{k}": row[k]
                        for k in METRIC_COLUMNS
                        if k not in ("rank", "phase", "epoch")
                    }
                )
        if events:
            table = wandb.Table(
                columns=list(events[0].keys()), data=[list(e.values()) for e in events[:2000]]
            )
            run.log({"events": table})
        png = os.path.join(run_dir, "postmortem", "waitfor.png")
        if os.path.exists(png):  # the post-mortem: the drawn wait-for graph and the cycle
            run.log(
                {
                    "postmortem/waitfor": wandb.Image(png),
                    "postmortem/cycle": summary.get("cycle") or "no cycle",
                }
            )
            attach_postmortem(run, run_dir)
        run.summary.update(wandb_summary(summary))
        return run.dir
    finally:
        if run is not None:
            run.finish()
        wandb.teardown()


def log_explore(cfg, out_dir: str, summary: dict, failures: list[dict]) -> str | None:
    """An exploration as one W&B run (job_type explore): the verdict counts, schedules/s and
    a table of its failures with the command that replays each."""
    if not _enabled(cfg):
        return None
    import wandb

    run = None
    try:
        from omegaconf import OmegaConf

        # its sections (pct, dfs, fanout, shrink) nested, as plain dicts W&B can hold
        explore = OmegaConf.to_container(cfg.explore, resolve=True)
        config = {**summary.get("choices", {}), "explore": explore}
        run = _init(cfg, out_dir, summary, config, "explore")
        counts = summary.get("verdicts") or {}
        run.summary.update(
            {f"verdicts/{v}": n for v, n in counts.items()}
            | {k: summary.get(k) for k in ("schedules", "schedules_per_s", "wall_s", "tokens_checked", "verdict")}
        )  # fmt: skip
        cols = ["failure", "verdict", "schedule", "strategy", "replay"]
        run.log({"failures": wandb.Table(columns=cols, data=[[f[c] for c in cols] for f in failures])})  # fmt: skip
        return run.dir
    finally:
        if run is not None:
            run.finish()
        wandb.teardown()
