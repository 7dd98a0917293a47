"""What the post-mortem page shows, read from a run dir (summary.json, postmortem/,
events.parquet, .hydra/overrides.yaml, schedule.txt)."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field

from ppx.watch.flight_recorder_read import PREFIX, Missing, load_dumps, missing_ranks

COUNTERS = ("submitted", "served", "refused", "lost", "oracle_mismatches", "ledger_violations",
            "flips", "voids", "retractions", "refusals", "stops", "cached_tokens", "passes",
            "out_tok_s", "ttft_ms_p50", "itl_ms_p50", "wall_s")  # fmt: skip


@dataclass
class Bar:
    rank: int
    start_s: float
    dur_s: float
    label: str
    op: str
    blocked: bool = False  # still open when the run was declared dead


@dataclass
class Facts:
    run_dir: str
    verdict: str
    reason: str
    cycle: str | None
    graph: dict  # {nodes, edges} of the wait-for graph
    cycle_edges: list[tuple[int, int]]
    bars: list[Bar] = field(default_factory=list)
    divergence: str | None = None
    missing: list[Missing] = field(default_factory=list)
    counters: dict = field(default_factory=dict)
    replay: str = ""


def _rows(path: str) -> list[dict]:
    """A parquet file's rows (pyarrow alone: pandas would triple the page's start-up)."""
    if not os.path.exists(path):
        return []
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def _json(path: str, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def timeline(pm: str, blocked: list) -> list[Bar]:
    """Every op the ranks' rings still hold, then each blocked op from its rank's last op to
    the end (the rings keep each rank's last 256 operations)."""
    ops = _rows(os.path.join(pm, "ops.parquet"))
    t0 = min((o["t_s"] for o in ops), default=0.0)
    bars = [
        Bar(o["rank"], o["t_s"] - t0, o["dur_s"], _label(o["op"], o["kind"], o["pass_id"]), o["op"])
        for o in ops
    ]
    end = max((b.start_s + b.dur_s for b in bars), default=0.0)
    end += max(end * 0.1, 1e-3)  # the blocked ops stay open past the last completed one
    for rec in blocked or []:
        if rec is None:
            continue
        mine = [b.start_s + b.dur_s for b in bars if b.rank == rec["rank"]]
        start = max(mine, default=0.0)
        label = f"{rec['op']} {rec['kind']} (rank{rec['peer']})" if rec["peer"] >= 0 else rec["op"]
        bars.append(Bar(rec["rank"], start, max(end - start, 0.0), label, rec["op"], True))
    return bars


def _label(op: str, kind: str, pass_id: int) -> str:
    return f"pass {pass_id}" if op == "compute" else f"{op} {kind}".strip()


def divergence(run_dir: str) -> str | None:
    """The first pass at which the ranks' admitted batches (rid, told prefix) differ, or a
    rank retracted or refused a told row. A rank that admitted nothing at a pass it went
    past (an event of a later pass) holds an empty batch there; one whose events stop
    before the pass (the run ended first) is left out, not read as a divergence."""
    ev = _rows(os.path.join(run_dir, "events.parquet"))
    told = [e for e in ev if e["kind"] in ("retraction", "refusal", "void") and e["pass_id"] >= 0]
    adm = [e for e in ev if e["kind"] == "admit" and e["rank"] >= 0]
    last: dict[int, int] = {}  # rank -> the last pass it recorded anything at
    for e in ev:
        if e["rank"] >= 0:
            last[e["rank"]] = max(last.get(e["rank"], -1), e["pass_id"])
    for pass_id in sorted({e["pass_id"] for e in adm + told}):
        t = [e for e in told if e["pass_id"] == pass_id]
        if t:
            return f"pass {pass_id}: rank{t[0]['rank']} {t[0]['kind']}: {t[0]['detail']}"
        batches: dict[int, list] = {r: [] for r, at in last.items() if at > pass_id}
        for e in adm:
            if e["pass_id"] == pass_id:
                batches.setdefault(e["rank"], []).append((e["rid"], e["detail"]))
        if len({tuple(sorted(b)) for b in batches.values()}) > 1:
            shown = "; ".join(f"rank{r}: {sorted(rid for rid, _ in b)}" for r, b in sorted(batches.items()))  # fmt: skip
            return f"pass {pass_id}: batches differ ({shown})"
    return None


def replay_command(run_dir: str) -> str:
    over = []
    path = os.path.join(run_dir, ".hydra", "overrides.yaml")
    if os.path.exists(path):
        import yaml

        over = [str(o) for o in yaml.safe_load(open(path)) or []]
    over = [o for o in over if not o.startswith("hydra.run.dir=")]
    sched = os.path.join(run_dir, "schedule.txt")
    if os.path.exists(sched):  # the simulator's schedule replays the very interleaving
        over.append(f"explore.replay={sched}")
    return shlex.join(["python", "-m", "ppx.run", *over])


def read(run_dir: str) -> Facts:
    s = _json(os.path.join(run_dir, "summary.json"), None)
    if s is None:
        raise FileNotFoundError(f"{run_dir}: no summary.json (not a ppx run dir?)")
    pm = os.path.join(run_dir, "postmortem")
    g = _json(os.path.join(pm, "waitfor.json"), {"nodes": [], "edges": []})
    cyc = s.get("cycle") or ""
    from ppx.watch.waitfor import find_cycle

    edges = [(e["src"], e["dst"]) for e in find_cycle(g) or []] if g.get("edges") else []
    return Facts(
        run_dir=run_dir,
        verdict=str(s.get("verdict")),
        reason=str(s.get("reason") or ""),
        cycle=cyc or None,
        graph={"nodes": g.get("nodes", []), "edges": g.get("edges", [])},
        cycle_edges=edges,
        bars=timeline(pm, s.get("blocked_on") or []),
        divergence=divergence(run_dir),
        missing=missing_ranks(load_dumps(os.path.join(pm, "flight_recorder"), PREFIX)),
        counters={k: s.get(k) for k in COUNTERS if k in s},
        replay=replay_command(run_dir),
    )
