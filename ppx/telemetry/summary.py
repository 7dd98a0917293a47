"""Build summary.json and the per-request rows from a finished run."""

from __future__ import annotations

import statistics

from ppx.telemetry.events import read_events

GROUP_COUNTERS = [
    "flips",
    "voids",
    "retractions",
    "refusals",
    "stops",
    "guard_floors_learned",
    "guard_clamps",
    "unresolved",
    "escalations",
    "prefix_floors_cleared",
    # engine.guard.defer_streak=offer (#944): streaks restarted by a changed offer, and
    # unresolved reports on a told<=0 offer that were never counted
    "defer_streak_resets",
    "unresolved_exempt",
    "told_rows_applied",
    "told_rows_ignored_stale",
    "told_cleared_at_retract",  # told_scope=epoch_retract: rows cleared at a re-queue (#1061b)
    "retracted_at_flip",
    "reprefill_tokens",
    "reconcile_misses",  # engine.admission.reconcile=scheduler: a rid the lookup found nowhere
    "reconcile_slot_answers",  # reconcile=slot: the slot's request answered a clobbered pointer
    "void_kept",  # engine.admission.void=keep: voided members parked in place
    "load_back_deferred",  # engine.kv.load_back=admitted: a host hit with no extent to load it
    "staggered_reads",  # local_extent=completed: a held extent read with a chunk still ahead
    "seat_vetoes",  # follower_seats=veto: rids a follower refused on its own seat count (#1153 F2)
    # engine.admission.prefetch_floor=group (#1175): rank 0 deferred a rid on the group's
    # completion floor / clamped to it / admitted because it covered what rank 0 wanted
    "prefetch_deferred",
    "prefetch_clamped",
    "prefetch_floor_admits",
    "seam_tails_lost",  # flip.seam_tail=rank0_local: requests whose TP tail stayed on rank 0
]


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 3)


# the config choices, in the order every table shows them: summary.json's `choices`, the W&B
# run's flat config keys, the analysis frame's columns
CHOICE_KEYS = (
    "exp",
    "pp",
    "tp",
    "seed",
    "device",
    "model",
    "workload",
    "admission",
    "ordering",
    "guard",
    "kernels",
    "flip",
    "faults",
    "readiness",
    "transport",
)


def choices_of(cfg, exp: str | None) -> dict:
    e = cfg.engine
    return {
        "exp": exp,
        "pp": int(cfg.pp),
        "tp": int(cfg.tp),
        "seed": int(cfg.seed),
        "device": str(cfg.device),
        "model": cfg.model.name,
        "workload": cfg.workload.name,
        "admission": e.admission.name,
        "ordering": e.ordering.name,
        "guard": e.guard.name,
        "kernels": e.kernels.name,
        "flip": cfg.flip.name,
        "faults": cfg.faults.name,
        "readiness": bool(e.readiness),
        "transport": str(e.transport),
    }


def request_rows(driver) -> list[dict]:
    rows = []
    tok = getattr(driver.wl, "tokenizer", None)  # a model with a tokenizer: text columns too
    for rec in driver.records.values():
        rows.append(
            {
                "rid": rec.req.rid,
                "prompt_len": len(rec.req.prompt),
                "output_len": len(rec.output),
                "output_ids": list(rec.output),
                "ttft_ms": rec.ttft_ms,
                "itl_ms": rec.itl_ms,
                "outcome": rec.outcome,
                "reason": rec.reason,
                "submit_t_s": rec.submit_t - driver.t0,
                "finish_t_s": (rec.token_t[-1] - driver.t0) if rec.token_t else None,
                "cached_tokens": rec.cached,
            }
        )
        if tok is not None:
            rows[-1]["prompt_text"] = tok.decode(rec.req.prompt)
            rows[-1]["output_text"] = tok.decode(rec.output)
    return rows


def collect_events(run_dir: str, world: int) -> list[dict]:
    import os

    rows = []
    for r in range(world):
        rows += read_events(os.path.join(run_dir, "ranks", f"rank{r}.events.jsonl"))
    return sorted(rows, key=lambda e: e["t_s"])


def build(
    cfg,
    exp,
    run_dir,
    outcome: dict,
    driver,
    reports: dict,
    mismatches: list,
    wall_s: float,
    extra: dict | None = None,
) -> dict:
    world = int(cfg.pp)
    recs = list(driver.records.values())
    served = [r for r in recs if r.outcome == "served"]
    t_start = min((r.submit_t for r in recs), default=driver.t0)
    window = (driver.last_token_t - t_start) if driver.last_token_t else None
    rep0 = reports.get(0) or {}
    per_rank: dict[str, list] = {}
    for k in GROUP_COUNTERS + [
        "cached_tokens",
        "prefill_tokens",
        "evictions",
        "ledger_violations",
        "pool_tokens",
    ]:
        per_rank[k] = [
            (reports.get(r) or {}).get(k, (reports.get(r) or {}).get("counters", {}).get(k, 0))
            for r in range(world)
        ]
    s = {
        "verdict": outcome["verdict"],
        "reason": outcome["reason"],
        "submitted": len(recs),
        "served": len(served),
        "refused": driver.count("refused"),
        "lost": driver.count("lost"),
        "out_tok_s": round(driver.tokens / window, 2) if window else None,
        "prefill_tok_s": round(rep0.get("prefill_tokens", 0) / window, 2) if window else None,
        "ttft_ms_p50": _pct([r.ttft_ms for r in served if r.ttft_ms is not None], 50),
        "ttft_ms_p90": _pct([r.ttft_ms for r in served if r.ttft_ms is not None], 90),
        "itl_ms_p50": _pct([r.itl_ms for r in served if r.itl_ms is not None], 50),
        "itl_ms_p90": _pct([r.itl_ms for r in served if r.itl_ms is not None], 90),
        "cached_tokens": rep0.get("cached_tokens", 0),
        "oracle_mismatches": len(mismatches),
        "oracle_first": [str(m) for m in mismatches[:5]],
        "ledger_violations": sum(per_rank["ledger_violations"]),
        "passes": outcome.get("passes"),
        "wall_s": round(wall_s, 3),
        "max_inflight": outcome.get("max_inflight"),
        "boot_s": outcome.get("boot_s"),
        "first_token_s": round(driver.first_token_t - driver.t0 + outcome["boot_s"], 3)
        if driver.first_token_t and outcome.get("boot_s") is not None
        else None,
        "cycle": (outcome.get("postmortem") or {}).get("cycle"),
        "blocked_on": (outcome.get("postmortem") or {}).get("blocked_on"),
        "cutover_ms_p50": None,
        "cutover_ms_max": None,
        "run_id": run_dir.rstrip("/").split("/")[-1],
        "run_dir": run_dir,
        "study": cfg.logger.group,
        "choices": choices_of(cfg, exp),
    }
    for k in GROUP_COUNTERS:
        # a void or a flip is one group event that every rank records; retractions and
        # refusals are each rank's own
        group_event = k in (
            "flips",
            "voids",
            "stops",
            "retracted_at_flip",
            "reprefill_tokens",
            "seam_tails_lost",
        )
        vals = [v or 0 for v in per_rank[k]]
        s[k] = int(max(vals or [0])) if group_event else int(sum(vals))
    cut = sorted(rep0.get("cutover_ms", []))
    if cut:
        s["cutover_ms_p50"], s["cutover_ms_max"] = _pct(cut, 50), round(cut[-1], 3)
    if s["verdict"] == "stopped":
        s["stops"] = max(s["stops"], 1)
    s["per_rank"] = per_rank
    s.update(extra or {})
    return s
