"""Reading a failed run's `postmortem/` directory and the flip windows of any run.

The post-mortem files are small JSON/text plus one parquet of channel operations; this
module turns them into plain Python objects and frames so the notebook and the plots do
not each re-parse the layout.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from ppx.analysis.load import EVENT_COLUMNS, PathLike, load_events, load_series, load_summary

OPS_COLUMNS = ["t_s", "rank", "op", "peer", "kind", "slot", "pass_id", "seq", "dur_s"]

_CYCLE_NODE = re.compile(r"rank\s*(-?\d+)")
_CYCLE_EDGE = re.compile(r"-\[(.*?)\]->")


def parse_cycle(cycle: str | None) -> list[tuple[int, int, str]]:
    """Split "rank0 -[flush chain]-> rank1 -[recv decision slot=1]-> rank0" into edges
    [(0, 1, "flush chain"), (1, 0, "recv decision slot=1")]."""
    if not cycle:
        return []
    nodes = [int(n) for n in _CYCLE_NODE.findall(cycle)]
    labels = _CYCLE_EDGE.findall(cycle)
    return [(nodes[i], nodes[i + 1], labels[i]) for i in range(min(len(labels), len(nodes) - 1))]


def cycle_table(cycle: str | None) -> pd.DataFrame:
    """The cycle as a table: who waits, for whom, on what."""
    rows = [
        {"waiter": f"rank{s}", "waits_for": f"rank{d}", "on": label}
        for s, d, label in parse_cycle(cycle)
    ]
    return pd.DataFrame(rows, columns=["waiter", "waits_for", "on"])


def cycle_ranks(cycle: str | None) -> list[int]:
    """The distinct ranks on a wait-for cycle, sorted."""
    return sorted({r for edge in parse_cycle(cycle) for r in edge[:2]})


def cycle_words(cycle: str | None) -> set[str]:
    """Every word on the cycle's edge labels ("flush", "chain", "recv", "decision", ...),
    so an expectation can ask for message kinds without matching slot numbers."""
    words: set[str] = set()
    for _, _, label in parse_cycle(cycle):
        words.update(w.lower() for w in re.findall(r"[A-Za-z_]+", label))
    return words


@dataclass
class Postmortem:
    """Everything under `postmortem/`, parsed; absent files give empty values."""

    run_dir: Path
    verdict: str | None = None
    reason: str | None = None
    cycle: str | None = None
    waitfor: dict[str, Any] = field(default_factory=lambda: {"nodes": [], "edges": []})
    blocked_on: Any = None
    ledger: Any = None
    stacks: dict[int, str] = field(default_factory=dict)
    last_events: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())
    ops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=OPS_COLUMNS))

    @property
    def present(self) -> bool:
        return (self.run_dir / "postmortem").is_dir()

    @property
    def cycle_edges(self) -> list[tuple[int, int, str]]:
        return parse_cycle(self.cycle)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def load_postmortem(run_dir: PathLike) -> Postmortem:
    """Parse one run's post-mortem (the summary's cycle wins over `cycle.txt`, which is a
    human rendering of the same thing)."""
    run_dir = Path(run_dir)
    pm_dir = run_dir / "postmortem"
    try:
        summary = load_summary(run_dir)
    except (OSError, json.JSONDecodeError):
        summary = {}
    pm = Postmortem(run_dir=run_dir, verdict=summary.get("verdict"), reason=summary.get("reason"))
    pm.waitfor = _read_json(pm_dir / "waitfor.json") or pm.waitfor
    # The summary's cycle first, then the graph's; cycle.txt is a human rendering that
    # may say "no cycle", so it only counts when it parses as one.
    pm.cycle = summary.get("cycle") or pm.waitfor.get("cycle")
    if not pm.cycle and (pm_dir / "cycle.txt").exists():
        text = (pm_dir / "cycle.txt").read_text().strip()
        pm.cycle = text if parse_cycle(text) else None
    pm.blocked_on = _read_json(pm_dir / "blocked_on.json") or summary.get("blocked_on")
    pm.ledger = _read_json(pm_dir / "ledger.json")
    for path in sorted((pm_dir / "stacks").glob("rank*.txt")):
        m = re.search(r"rank(-?\d+)", path.stem)
        if m:
            pm.stacks[int(m.group(1))] = path.read_text()
    pm.last_events = _last_events_frame(_read_json(pm_dir / "last_events.json") or {})
    if (pm_dir / "ops.parquet").exists():
        pm.ops = pq.read_table(pm_dir / "ops.parquet").to_pandas()
    return pm


def _last_events_frame(raw: dict[str, list[dict[str, Any]]]) -> pd.DataFrame:
    rows = []
    for key, events in raw.items():
        m = re.search(r"-?\d+", str(key))
        for ev in events or []:
            row = dict(ev)
            row.setdefault("rank", int(m.group(0)) if m else -1)
            rows.append(row)
    if not rows:
        return pd.DataFrame(columns=EVENT_COLUMNS)
    df = pd.DataFrame(rows)
    return df.sort_values(["rank", "t_s"] if "t_s" in df else ["rank"], kind="stable")


def flip_windows(events: pd.DataFrame) -> pd.DataFrame:
    """Pair each `flip_start` with the next `flip_end` (one row per flip, supervisor view).

    A flip that never ended (the run stopped mid-flip) keeps `end_s` NaN so it is still
    drawn and counted.
    """
    ev = events[events["kind"].isin(["flip_start", "flip_end"])].sort_values("t_s")
    # Every rank may log the flip; the earliest start / latest end per epoch is the window.
    rows: list[dict[str, Any]] = []
    open_start: float | None = None
    open_epoch: int | None = None
    for t, kind, epoch in zip(ev["t_s"], ev["kind"], ev["epoch"]):
        if kind == "flip_start" and open_start is None:
            open_start, open_epoch = float(t), int(epoch)
        elif kind == "flip_end" and open_start is not None:
            rows.append({"start_s": open_start, "end_s": float(t), "epoch": open_epoch})
            open_start = None
        elif kind == "flip_end" and rows and t > rows[-1]["end_s"]:
            rows[-1]["end_s"] = float(t)
    if open_start is not None:
        rows.append({"start_s": open_start, "end_s": float("nan"), "epoch": open_epoch})
    df = pd.DataFrame(rows, columns=["start_s", "end_s", "epoch"])
    df["cutover_ms"] = (df["end_s"] - df["start_s"]) * 1000.0
    return df


def flip_impact(run_dir: PathLike, window_s: float = 0.5) -> pd.DataFrame:
    """Per flip: its cut-over time, voids/retractions within `window_s` of it, and the
    group throughput just before vs. just after — the table the flip notebook shows."""
    events = load_events(run_dir)
    flips = flip_windows(events)
    series = group_series(load_series(run_dir))
    out = []
    for f in flips.itertuples(index=False):
        end = f.end_s if pd.notna(f.end_s) else f.start_s
        lo, hi = f.start_s - window_s, end + window_s
        near = events[(events["t_s"] >= lo) & (events["t_s"] <= hi)]
        before = series[(series["t_s"] >= lo) & (series["t_s"] < f.start_s)]["out_tok_s"]
        after = series[(series["t_s"] > end) & (series["t_s"] <= hi)]["out_tok_s"]
        out.append(
            {
                "epoch": int(f.epoch),
                "start_s": f.start_s,
                "cutover_ms": f.cutover_ms,
                "voids": int((near["kind"] == "void").sum()),
                "retractions": int((near["kind"] == "retract").sum()),
                "tok_s_before": before.mean(),
                "tok_s_after": after.mean(),
            }
        )
    cols = ["epoch", "start_s", "cutover_ms", "voids", "retractions"]
    return pd.DataFrame(out, columns=cols + ["tok_s_before", "tok_s_after"])


def group_series(series: pd.DataFrame) -> pd.DataFrame:
    """The group-total rows (rank -1) of a metrics frame, or the per-bucket sum over ranks
    when the engine did not log a total row."""
    total = series[series["rank"] == -1]
    if len(total):
        return total.sort_values("t_s")
    if series.empty:
        return series
    keys = ["run_dir", "t_s"] if "run_dir" in series else ["t_s"]
    agg = series.groupby(keys, as_index=False).agg(
        out_tok_s=("out_tok_s", "sum"),
        voids=("voids", "sum"),
        retractions=("retractions", "sum"),
        phase=("phase", "first"),
        epoch=("epoch", "max"),
    )
    return agg.sort_values("t_s")
