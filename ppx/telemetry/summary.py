"""Build summary.json and the per-request rows from a finished run."""

from __future__ import annotations

import statistics

from ppx.protocol import registry
from ppx.protocol.policy import policy_of
from ppx.telemetry.events import read_events

# every counter a design keeps (ppx/protocol/registry.py), named once for summary.json, the
# W&B summary and the analysis frame; a group counter is one event every rank records (the
# summary takes the max over ranks), the others are each rank's own (summed)
GROUP_COUNTERS = [c.name for c in registry.COUNTERS]
GROUP_EVENTS = frozenset(c.name for c in registry.COUNTERS if c.group)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 3)


# the config choices, in the order every table shows them: summary.json's `choices`, the W&B
# run's flat config keys, the analysis frame's columns. The run's shape first, then every
# protocol switch and its numbers, flat (ppx/protocol/registry.py), so runs that differ in any
# sub-switch are told apart everywhere.
RUN_KEYS = ("exp", "pp", "tp", "seed", "device", "model", "workload", "ordering", "kernels")
RUN_KEYS += ("flip", "faults", "transport")
CHOICE_KEYS = RUN_KEYS + tuple(k for k in registry.CHOICE_NAMES if k not in RUN_KEYS)


def choices_of(cfg, exp: str | None) -> dict:
    run = {
        "exp": exp,
        "pp": int(cfg.pp),
        "tp": int(cfg.tp),
        "seed": int(cfg.seed),
        "device": str(cfg.device),
        "model": cfg.model.name,
        "workload": cfg.workload.name,
        "ordering": cfg.engine.ordering.name,
        "kernels": cfg.engine.kernels.name,
        "flip": cfg.flip.name,
        "faults": cfg.faults.name,
        "transport": str(cfg.engine.transport),
    }
    return run | registry.choices(cfg)


def _rank_value(report: dict | None, board: dict, key: str, refuses: bool) -> int:
    """A rank's counter: its report's, or -- for a rank that left no report (killed while it
    was blocked on a peer that had ended the run) -- what its board row counted. The board
    counts a follower's retractions and refusals together: they are whichever its policy makes."""
    if report is not None:
        return report.get(key, report.get("counters", {}).get(key, 0))
    if key in ("retractions", "refusals"):
        return board.get("retracted", 0) if (key == "refusals") == refuses else 0
    return board.get(key, 0)


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
    refuses = policy_of(cfg).executes  # a follower that cannot run a row refuses it
    recs = list(driver.records.values())
    served = [r for r in recs if r.outcome == "served"]
    t_start = min((r.submit_t for r in recs), default=driver.t0)
    stream = driver.stream
    window = (stream.last_t - t_start) if stream.last_t else None
    rep0 = reports.get(0) or {}
    per_rank: dict[str, list] = {}
    board = outcome.get("board_counts") or [{} for _ in range(world)]
    for k in GROUP_COUNTERS + [
        "cached_tokens",
        "prefill_tokens",
        "evictions",
        "ledger_violations",
        "pool_tokens",
    ]:
        per_rank[k] = [_rank_value(reports.get(r), board[r], k, refuses) for r in range(world)]
    s = {
        "verdict": outcome["verdict"],
        "reason": outcome["reason"],
        "submitted": len(recs),
        "served": len(served),
        "refused": driver.count("refused"),
        "lost": driver.count("lost"),
        "out_tok_s": round(stream.tokens / window, 2) if window else None,
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
        "first_token_s": round(stream.first_t - driver.t0 + outcome["boot_s"], 3)
        if stream.first_t and outcome.get("boot_s") is not None
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
        vals = [v or 0 for v in per_rank[k]]
        s[k] = int(max(vals or [0])) if k in GROUP_EVENTS else int(sum(vals))
    cut = sorted(rep0.get("cutover_ms", []))
    if cut:
        s["cutover_ms_p50"], s["cutover_ms_max"] = _pct(cut, 50), round(cut[-1], 3)
    if s["verdict"] == "stopped":
        s["stops"] = max(s["stops"], 1)
    s["per_rank"] = per_rank
    s.update(extra or {})
    return s
