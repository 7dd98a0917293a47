"""Synthetic run directories in exactly the run-store schema.

Used by the analysis tests, the notebook tests, the study tests and
`benchmarks/bench_load_runs.py` until (and alongside) real runs from `python -m ppx.run`.
Numbers are plausible, not meaningful; what matters is that every file, column and dtype
matches what the engine writes, which `test_fakes_match_the_engine.py` checks against the
real runs of the session (the wait-for graph and cycle are built by ppx.watch.waitfor itself).
"""

from __future__ import annotations

import itertools
import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fake_postmortem import write_postmortem

from ppx.config import PPXConfig
from ppx.telemetry.summary import GROUP_COUNTERS, choices_of
from ppx.watch.waitfor import cycle_text, find_cycle, graph

# the real schema's choices (every switch, flat, in the engine's order), with the fake
# sweep's own base on top
DEFAULT_CHOICES: dict[str, Any] = choices_of(PPXConfig(), "smoke") | {
    "pp": 2,
    "ordering": "decision_first",
    "guard": "rid",
    "readiness": True,
}
INT_CHOICES = ("pp", "tp", "seed", "livelock_passes", "defer_cap")

# The 2x2x2 sweep most tests use: the flush_before_decision half wedges.
MATRIX: dict[str, list[Any]] = {
    "engine/admission": ["rank_local", "decision"],
    "engine/guard": ["rid", "prefix"],
    "engine/ordering": ["decision_first", "flush_before_decision"],
}


def choice_key(override_key: str) -> str:
    """`engine/guard` -> `guard`, `+exp` -> `exp`: the choices name of a group override."""
    return override_key.lstrip("+~").split("/")[-1].split(".")[-1]


def fake_verdict(choices: dict[str, Any]) -> str:
    """The fake engine's physics: flushing before the decision deadlocks the ring."""
    if choices["ordering"] == "flush_before_decision":
        return "wedged"
    if choices["faults"] == "kill_rank":
        return "dead_peer"
    return "served"


def _write_parquet(path: Path, cols: dict[str, Any], types: dict[str, pa.DataType]) -> None:
    # text columns as pandas writes them (the engine's store goes through pandas)
    def typed(k: str, v: list) -> pa.Array:
        if k not in types and any(isinstance(x, str) for x in v):
            return pa.array(v, type=pa.large_string())
        return pa.array(v, type=types.get(k))

    table = pa.table({k: typed(k, v) for k, v in cols.items()})
    pq.write_table(table, path, compression="none")


def write_run(
    run_dir: str | Path,
    overrides: list[str] | None = None,
    study: str | None = None,
    verdict: str | None = None,
    n_requests: int = 16,
    tables: bool = True,
) -> Path:
    """Write one run dir whose choices follow `overrides` (Hydra syntax) over defaults."""
    run_dir = Path(run_dir)
    overrides = list(overrides or [])
    choices = dict(DEFAULT_CHOICES)
    for item in overrides:
        key, _, value = item.partition("=")
        name = choice_key(key)
        if name in choices:
            choices[name] = int(value) if name in INT_CHOICES else value
    verdict = verdict or fake_verdict(choices)
    seed = zlib.crc32("|".join(sorted(overrides)).encode())
    rng = np.random.default_rng(seed)
    pp = int(choices["pp"])
    ok = verdict == "served"
    wall = float(rng.uniform(3.0, 5.0))
    flip_every = _flip_period(choices["flip"])
    flip_times = list(np.arange(flip_every, wall - 0.5, flip_every)) if flip_every else []
    voids = int(rng.integers(2, 6)) * (1 if choices["guard"] == "prefix" else 3) * pp
    retractions = len(flip_times) * int(rng.integers(1, 3))
    served = n_requests if ok else int(n_requests * 0.4)
    blocked = None if ok else [_blocked(r, pp) for r in range(pp)]
    cycle = cycle_text(find_cycle(graph(blocked))) if verdict == "wedged" else None
    summary = {
        "verdict": verdict,
        "reason": "" if ok else "every rank blocked for at least 2.0s with no progress",
        "submitted": n_requests,
        "served": served,
        "refused": 0,
        "lost": n_requests - served,
        "out_tok_s": float(rng.uniform(80, 120) / (1 + 0.1 * len(flip_times))) if ok else None,
        "prefill_tok_s": float(rng.uniform(400, 600)),
        "ttft_ms_p50": float(rng.uniform(20, 40)),
        "ttft_ms_p90": float(rng.uniform(50, 90)),
        "itl_ms_p50": float(rng.uniform(5, 9)),
        "itl_ms_p90": float(rng.uniform(10, 20)),
        "cached_tokens": int(rng.integers(0, 200)) if choices["workload"] == "shared_prefix" else 0,
        "oracle_mismatches": 0,
        "ledger_violations": 0,
        "flips": len(flip_times),
        "voids": voids,
        "retractions": retractions,
        "refusals": 0,
        "stops": 0 if ok else 1,
        "guard_floors_learned": int(rng.integers(0, 4)),
        "guard_clamps": int(rng.integers(0, 4)),
        "unresolved": 0,
        "retracted_at_flip": retractions,
        "reprefill_tokens": retractions * 32,
        "passes": int(wall * 50),
        "cutover_ms_p50": float(rng.uniform(30, 60)) if flip_times else None,
        "cutover_ms_max": float(rng.uniform(60, 120)) if flip_times else None,
        "wall_s": wall,
        "oracle_first": [],
        "oracle_checked": served,
        "max_inflight": pp,
        "boot_s": 1.5,
        "first_token_s": 1.6,
        "cycle": cycle,
        "blocked_on": blocked,
        "run_id": f"fake-{seed:08x}",
        "run_dir": str(run_dir),
        "study": study,
        "choices": choices,
        "per_rank": {
            k: [0] * pp
            for k in (*GROUP_COUNTERS, "cached_tokens", "prefill_tokens", "evictions")
            + ("ledger_violations", "pool_tokens")
        }
        | {"voids": [voids] * pp},
    }
    for k in GROUP_COUNTERS:  # every group counter the engine names, zero unless set above
        summary.setdefault(k, 0)
    (run_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text(
        "".join(f"- {o}\n" for o in overrides) if overrides else "[]\n"
    )
    cfg = "".join(f"{k}: {json.dumps(v)}\n" for k, v in choices.items())
    (run_dir / ".hydra" / "config.yaml").write_text(cfg)
    if tables:
        _write_tables(run_dir, rng, pp, wall, flip_times, n_requests, served, voids, verdict)
    if not ok:
        write_postmortem(run_dir, pp, wall, blocked)
    # summary.json last: its presence is what marks a run as finished to pollers.
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def _blocked(rank: int, pp: int) -> dict[str, Any]:
    # The engine's flush_before_decision wedge at any pp: rank 0 flushes the chain to rank 1,
    # rank 1 waits for the decision from rank 0 (the 2-rank cycle), and every later rank waits
    # for the chain rank 1 never forwarded
    op, kind, peer, slot = {
        0: ("flush", "chain", 1, -1),
        1: ("recv", "decision", 0, 1),
    }.get(rank, ("recv", "chain", rank - 1, -1))
    return {
        "rank": rank,
        "op": op,
        "peer": peer,
        "kind": kind,
        "slot": slot,
        "pass_id": 11,
        "seq": 60 + rank,
        "width": -1,
        "since_s": 2.0,
    }


def _flip_period(flip: str) -> float:
    """conf/flip: every_2s, or every_40_passes (about 0.8 s at the fake's 50 passes/s)."""
    if flip == "off":
        return 0.0
    digits = "".join(c for c in flip if c.isdigit())
    return float(digits) if flip.endswith("s") and not flip.endswith("passes") else 0.8


def _write_tables(run_dir, rng, pp, wall, flip_times, n_requests, served, voids, verdict) -> None:
    t = np.round(np.arange(0.0, wall, 0.1), 3)
    ranks = list(range(pp)) + [-1]
    in_flip = np.zeros_like(t, dtype=bool)
    epoch = np.zeros_like(t, dtype=np.int64)
    for i, ft in enumerate(flip_times):
        in_flip |= (t >= ft) & (t < ft + 0.1)
        epoch[t >= ft] = i + 1
    rate = np.where(in_flip, 5.0, rng.uniform(80, 120, size=t.size))
    cols: dict[str, list] = {k: [] for k in ("t_s", "rank", "phase", "epoch", "passes")}
    cols.update({k: [] for k in ("tokens", "finished", "voids", "flips", "retractions")})
    cols["out_tok_s"] = []
    for r in ranks:
        share = 1.0 if r == -1 else 1.0 / pp
        cols["t_s"] += t.tolist()
        cols["rank"] += [r] * t.size
        cols["phase"] += ["tp" if e % 2 else "pp" for e in epoch]
        cols["epoch"] += epoch.tolist()
        cols["passes"] += (np.arange(t.size) * 5).tolist()
        cols["tokens"] += np.cumsum(rate * 0.1 * share).astype(np.int64).tolist()
        cols["finished"] += np.linspace(0, served, t.size).astype(np.int64).tolist()
        cols["voids"] += np.linspace(0, voids * share, t.size).astype(np.int64).tolist()
        cols["flips"] += epoch.tolist()
        cols["retractions"] += epoch.tolist()
        cols["out_tok_s"] += (rate * share).tolist()
    _write_parquet(run_dir / "metrics.parquet", cols, {"rank": pa.int64(), "epoch": pa.int64()})

    ev: dict[str, list] = {k: [] for k in ("t_s", "rank", "kind", "pass_id", "slot", "rid")}
    ev.update({"epoch": [], "detail": []})

    def add(ts, rank, kind, rid=-1, ep=0, detail=""):
        for k, v in zip(ev, (float(ts), rank, kind, int(ts * 50), rid % 2, rid, ep, detail)):
            ev[k].append(v)

    for rid in range(n_requests):
        start = wall * rid / (n_requests + 2)
        add(start, 0, "admit", rid)
        if rid < served:
            add(min(start + 0.8, wall), 0, "finish", rid)
    for i, ft in enumerate(flip_times):  # every rank records the cutover it took part in
        for r in range(pp):
            add(ft, r, "flip_start", ep=i, detail="pp->tp" if i % 2 == 0 else "tp->pp")
        add(ft + 0.05, 0, "void", ep=i)
        add(ft + 0.06, 0, "retract", rid=i, ep=i)
        for r in range(pp):
            add(ft + 0.09, r, "flip_end", ep=i + 1)
    if verdict != "served":  # the supervisor's own event: how the run ended
        add(wall, -1, verdict, detail="every rank blocked")
    _write_parquet(run_dir / "events.parquet", ev, {"rank": pa.int64(), "rid": pa.int64()})

    lens = rng.integers(8, 64, size=n_requests)
    outs = rng.integers(4, 16, size=n_requests)
    req = {
        "rid": list(range(n_requests)),
        "prompt_len": lens.tolist(),
        "output_len": outs.tolist(),
        "output_ids": [rng.integers(0, 1000, size=o).tolist() for o in outs],
        "ttft_ms": rng.gamma(4.0, 8.0, size=n_requests).tolist(),
        "itl_ms": rng.gamma(6.0, 1.2, size=n_requests).tolist(),
        "outcome": ["served" if i < served else "lost" for i in range(n_requests)],
        "reason": ["" if i < served else "wedged" for i in range(n_requests)],
        "submit_t_s": [wall * i / (n_requests + 2) for i in range(n_requests)],
        "finish_t_s": [wall * i / (n_requests + 2) + 0.8 for i in range(n_requests)],
        "cached_tokens": [0] * n_requests,
        # the tokenizer's text (model=hf); empty for the random-weight models
        "prompt_text": [None] * n_requests,
        "output_text": [None] * n_requests,
    }
    types = {"output_ids": pa.list_(pa.int64()), "rid": pa.int64(), "cached_tokens": pa.int64()}
    # the engine writes these text columns so
    types |= {k: pa.string() for k in ("outcome", "reason", "prompt_text", "output_text")}
    _write_parquet(run_dir / "requests.parquet", req, types)


def write_sweep(
    sweep_dir: str | Path,
    sweep: dict[str, list[Any]],
    base: list[str] | None = None,
    study: str | None = None,
    tables: bool = True,
) -> list[Path]:
    """Write a Hydra-multirun-shaped sweep: `sweep_dir/<job_num>/` for each cell of the
    cartesian product of `sweep`, with `base` overrides first, like the study runner."""
    keys = list(sweep)
    dirs = []
    for num, values in enumerate(itertools.product(*(sweep[k] for k in keys))):
        overrides = list(base or []) + [f"{k}={v}" for k, v in zip(keys, values)]
        dirs.append(write_run(Path(sweep_dir) / str(num), overrides, study=study, tables=tables))
    return dirs
