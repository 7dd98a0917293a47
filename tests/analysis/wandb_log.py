"""Reading what ppx logged to W&B back, offline: the run's `.wandb` transaction log decoded by
`wandb leet inspect --json` (the W&B CLI's own reader; no network)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field


@dataclass
class LoggedRun:
    """A run as the W&B transaction log holds it (the attributes `wandb_record` reads)."""

    id: str
    group: str
    tags: list[str]
    path: list[str]
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    series: set[str] = field(default_factory=set)
    url: str | None = None


def read_log(wandb_file: str) -> LoggedRun:
    out = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", wandb_file],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    run = next(r["run"] for r in records if r["type"] == "run")
    logged = LoggedRun(
        run["run_id"], run["run_group"], run["tags"], ["offline", "ppx", run["run_id"]]
    )
    logged.config.update(run["config"]["update"])
    for r in records:
        if r["type"] == "config":
            logged.config.update(r["config"].get("update", {}))
        elif r["type"] == "summary":
            # the log names nested values by dotted path; the API hands them back nested
            for k, v in r["summary"].get("update", {}).items():
                *outer, last = k.split(".")
                node = logged.summary
                for o in outer:
                    node = node.setdefault(o, {})
                node[last] = v
        elif r["type"] == "history":
            # a logged table shows up as `events.<field>` keys: name it once, as `events`
            item = r["history"]["item"]
            logged.series |= {k.split(".")[0] for k in item if not k.startswith("_")}
    return logged
