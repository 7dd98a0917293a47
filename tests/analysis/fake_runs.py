"""Synthetic run directories in exactly the run-store schema.

Used by the analysis tests, the notebook tests, the study tests and
`benchmarks/bench_load_runs.py` until (and alongside) real runs from `python -m ppx.run`.
Numbers are plausible, not meaningful; what matters is that every file, column and dtype
matches what the engine writes.
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

DEFAULT_CHOICES: dict[str, Any] = {
    "exp": "smoke",
    "pp": 2,
    "tp": 1,
    "seed": 0,
    "device": "cpu",
    "model": "tiny",
    "workload": "uniform",
    "admission": "rank_local",
    "ordering": "decision_first",
    "guard": "rid",
    "kernels": "torch",
    "flip": "off",
    "faults": "none",
    "readiness": True,
}
INT_CHOICES = ("pp", "tp", "seed")

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
    if choices["faults"] == "dead_peer":
        return "dead_peer"
    return "served"


def _write_parquet(path: Path, cols: dict[str, Any], types: dict[str, pa.DataType]) -> None:
    table = pa.table({k: pa.array(v, type=types.get(k)) for k, v in cols.items()})
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
    cycle = None
    if verdict == "wedged":
        cycle = "rank0 -[flush chain]-> rank1 -[recv decision slot=1]-> rank0"
        if pp >= 3:
            cycle = (
                "rank0 -[flush chain]-> rank1 -[recv chain slot=0]-> rank2 "
                "-[recv decision slot=1]-> rank0"
            )
    summary = {
        "verdict": verdict,
        "reason": "all requests served" if ok else f"{verdict}: no progress for 2.0s",
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
        "cycle": cycle,
        "run_id": f"fake-{seed:08x}",
        "study": study,
        "choices": choices,
        "per_rank": {"passes": [int(wall * 50)] * pp, "voids": [voids // pp] * pp},
        "blocked_on": None if ok else [_blocked(r, pp) for r in range(pp)],
    }
    (run_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text(
        "".join(f"- {o}\n" for o in overrides) if overrides else "[]\n"
    )
    cfg = "".join(f"{k}: {json.dumps(v)}\n" for k, v in choices.items())
    (run_dir / ".hydra" / "config.yaml").write_text(cfg)
    if tables:
        _write_tables(run_dir, rng, pp, wall, flip_times, n_requests, served, voids)
    if not ok:
        write_postmortem(run_dir, pp, wall, cycle, summary["blocked_on"])
    # summary.json last: its presence is what marks a run as finished to pollers.
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def _blocked(rank: int, pp: int) -> dict[str, Any]:
    # The engine's shape: the call in flight and how long it had been blocked.
    op, kind = ("flush", "chain") if rank == 0 else ("recv", "decision")
    return {
        "rank": rank,
        "op": op,
        "peer": (rank + 1) % pp,
        "kind": kind,
        "slot": 1,
        "pass_id": 11,
        "seq": 60 + rank,
        "width": -1,
        "since_s": 2.0,
    }


def _flip_period(flip: str) -> float:
    if flip == "off":
        return 0.0
    digits = "".join(c for c in flip if c.isdigit())
    return float(digits or 2)


def _write_tables(run_dir, rng, pp, wall, flip_times, n_requests, served, voids) -> None:
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
    for i, ft in enumerate(flip_times):
        add(ft, -1, "flip_start", ep=i, detail="pp->tp" if i % 2 == 0 else "tp->pp")
        add(ft + 0.05, 0, "void", ep=i)
        add(ft + 0.06, 0, "retract", rid=i, ep=i)
        add(ft + 0.09, -1, "flip_end", ep=i + 1)
    if served < n_requests:
        add(wall, -1, "wedge", detail="no progress")
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
    }
    types = {"output_ids": pa.list_(pa.int64()), "rid": pa.int64(), "cached_tokens": pa.int64()}
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
