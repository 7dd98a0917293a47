"""The post-mortem of a run that did not serve: written before the ranks are torn down.

postmortem/: blocked_on.json, waitfor.json, cycle.txt, waitfor.png, stacks/rank{r}.txt
(faulthandler, registered on SIGUSR1 at rank start; py-spy --native too when present),
last_events.json, ledger.json, ops.parquet (the per-rank channel-operation timeline),
flight_recorder/ (PyTorch Flight Recorder dumps: ppx/watch/flight_recorder.py).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time

import pandas as pd

from ppx.engine.board import Board
from ppx.engine.transport.registry import GLOO
from ppx.telemetry.events import read_events
from ppx.watch import flight_recorder, torch_fr
from ppx.watch.waitfor import cycle_text, edge_label, find_cycle, graph

STACK_WAIT_S = 0.5

OPS_TYPES = {
    "rank": "Int64", "op": "string", "peer": "Int64", "kind": "string", "slot": "Int64",
    "pass_id": "Int64", "seq": "Int64", "dur_s": "float64", "t_s": "float64",
}  # fmt: skip


def capture_stacks(procs: list, pm_dir: str) -> None:
    for p in procs:
        if p.is_alive() and p.pid:  # remote ranks (no local pid) were dumped by their node
            try:
                os.kill(p.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
    time.sleep(STACK_WAIT_S)
    ranks_dir = os.path.join(os.path.dirname(pm_dir), "ranks")
    live = [r for r, p in enumerate(procs) if p.is_alive() and p.pid]
    torch_fr.collect(live, ranks_dir, os.path.join(pm_dir, "flight_recorder"))
    for r in range(len(procs)):
        src = os.path.join(ranks_dir, f"rank{r}.stack.txt")
        if os.path.exists(src):
            shutil.copy(src, os.path.join(pm_dir, "stacks", f"rank{r}.txt"))
    for r, p in enumerate(procs):
        if not p.is_alive() or not p.pid:
            continue
        text = pyspy_dump(p.pid)
        if text is not None:
            with open(os.path.join(pm_dir, "stacks", f"rank{r}.pyspy.txt"), "w") as f:
                f.write(text)


def pyspy_dump(pid: int) -> str | None:
    """py-spy's native stacks of `pid`; None without py-spy; why it failed where not permitted."""
    spy = shutil.which("py-spy")
    if spy is None:
        return None
    try:
        out = subprocess.run(
            [spy, "dump", "--native", "--pid", str(pid)], capture_output=True, text=True, timeout=5
        )
        return out.stdout or out.stderr
    except (subprocess.SubprocessError, OSError) as e:  # not permitted here: say so
        return f"py-spy failed: {e}\n"


def draw(g: dict, cycle: list[dict] | None, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(len(g["nodes"]), 1)
    pos = {
        r: (
            math.cos(2 * math.pi * r / n + math.pi / 2),
            math.sin(2 * math.pi * r / n + math.pi / 2),
        )
        for r in g["nodes"]
    }
    in_cycle = {(e["src"], e["dst"]) for e in cycle or []}
    fig, ax = plt.subplots(figsize=(5, 5))
    for e in g["edges"]:
        (x0, y0), (x1, y1) = pos[e["src"]], pos[e["dst"]]
        color = "crimson" if (e["src"], e["dst"]) in in_cycle else "gray"
        ax.annotate(
            "",
            xy=(x1 * 0.82, y1 * 0.82),
            xytext=(x0 * 0.82, y0 * 0.82),
            arrowprops=dict(arrowstyle="-|>", color=color, lw=2, connectionstyle="arc3,rad=0.15"),
        )
        ax.text(
            (x0 + x1) / 2 * 0.9,
            (y0 + y1) / 2 * 0.9,
            e["label"],
            fontsize=8,
            ha="center",
            color=color,
        )
    for r, (x, y) in pos.items():
        ax.add_patch(plt.Circle((x, y), 0.16, color="steelblue"))
        ax.text(x, y, f"rank{r}", ha="center", va="center", color="white", fontsize=9)
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=9)
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def write(
    run_dir: str,
    board: Board,
    procs: list,
    verdict: str,
    t0_mono_ns: int,
    t0: float,
    capture: bool = True,
    runnable: set[int] | None = None,
    backend: str = GLOO,
) -> dict:
    """Everything a researcher needs to explain the death; returns {cycle, blocked_on}.
    `runnable`: ranks that could still go on. Their records (the last operation they parked
    in) stay out of the wait-for graph, so no cycle is invented through a rank that was not
    blocked; cycle.txt then says which ranks were runnable and what they did last."""
    pm = os.path.join(run_dir, "postmortem")
    os.makedirs(os.path.join(pm, "stacks"), exist_ok=True)
    seen = [board.blocked_on(r) for r in range(board.world)]
    runnable = runnable or set()
    records = [None if r in runnable else rec for r, rec in enumerate(seen)]
    if capture:
        capture_stacks(procs, pm)
    g = graph(records)
    cyc = find_cycle(g)
    text = cycle_text(cyc)
    if runnable and not text:
        last = "; ".join(
            f"rank{r} runnable (last: {edge_label(seen[r]) if seen[r] else 'no operation'})"
            for r in sorted(runnable)
        )
        g["runnable"] = sorted(runnable)
    # the same record in torch's format (a runnable rank's parked op is not in flight)
    flight_recorder.write(pm, board, records, backend)
    with open(os.path.join(pm, "blocked_on.json"), "w") as f:
        json.dump(records, f, indent=1)
    with open(os.path.join(pm, "waitfor.json"), "w") as f:
        json.dump(g | {"cycle": text}, f, indent=1)
    with open(os.path.join(pm, "cycle.txt"), "w") as f:
        f.write((text or "no cycle" + (f": {last}" if runnable else "")) + "\n")
    draw(g, cyc, os.path.join(pm, "waitfor.png"), f"{verdict}: {text or 'no cycle'}")
    last = {
        f"rank{r}": read_events(os.path.join(run_dir, "ranks", f"rank{r}.events.jsonl"))[-20:]
        for r in range(board.world)
    }
    with open(os.path.join(pm, "last_events.json"), "w") as f:
        json.dump(last, f, indent=1)
    ledgers = {}
    for r in range(board.world):
        try:
            with open(os.path.join(run_dir, "ranks", f"rank{r}.json")) as f:
                ledgers[f"rank{r}"] = json.load(f).get("ledger")
        except (FileNotFoundError, json.JSONDecodeError):
            ledgers[f"rank{r}"] = "no report: the rank was blocked or killed (see stacks)"
    with open(os.path.join(pm, "ledger.json"), "w") as f:
        json.dump(ledgers, f, indent=1)
    ops = [o for r in range(board.world) for o in board.ops(r)]
    df = pd.DataFrame(
        ops, columns=["t_ns", "rank", "op", "peer", "kind", "slot", "pass_id", "seq", "dur_s"]
    )
    df["t_s"] = (df["t_ns"] - t0_mono_ns) / 1e9
    # typed even when no op completed before the wedge (one at the first pass): an empty
    # frame's columns would be written as `null` and the table's shape would depend on timing
    df = df.drop(columns=["t_ns"]).astype(OPS_TYPES)
    df.to_parquet(os.path.join(pm, "ops.parquet"), index=False)
    return {"cycle": text, "blocked_on": records}
