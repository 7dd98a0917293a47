"""W&B sink: one run per engine boot, offline by default, finished in a `finally`.

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


def log_run(
    cfg, run_dir: str, summary: dict, metrics: list[dict], events: list[dict], resolved: dict
) -> str | None:
    lg = cfg.logger
    if lg.name == "none" or lg.mode == "disabled":
        return None
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    choices = summary.get("choices", {})
    tags = [f"{k}={v}" for k, v in tag_choices(choices).items()] + list(lg.tags or [])
    run = None
    try:
        run = wandb.init(
            project=lg.project,
            entity=lg.entity,
            mode=lg.mode,
            dir=run_dir,
            group=lg.group or summary.get("study") or choices.get("exp") or "adhoc",
            job_type="supervisor",
            config=wandb_config(summary, resolved),
            tags=[t[:64] for t in tags],
            name=os.path.basename(run_dir.rstrip("/")),
            settings=wandb.Settings(console="off", x_disable_stats=True),
        )
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
        run.summary.update(wandb_summary(summary))
        return run.dir
    finally:
        if run is not None:
            run.finish()
        wandb.teardown()
