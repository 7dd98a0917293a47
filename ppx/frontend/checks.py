"""A workload's checks before any spawn: its knobs, its tokenizer, its prompt file or trace
(one error line naming the problem; `workload.num_requests` is capped at what the file has)."""

from __future__ import annotations

import math

from ppx.frontend.prompts import check_text
from ppx.frontend.text import TextError


def check_knobs(w) -> None:
    rate = float(w.rate)
    if rate < 0 or math.isnan(rate):
        raise TextError(f"workload.rate={w.rate}: requests/s, 0 or inf for the closed loop")
    b, t = w.bench, w.trace
    if not float(b.burstiness) > 0:
        raise TextError(f"workload.bench.burstiness={b.burstiness} must be positive (1 = Poisson)")
    if not 0 <= float(b.range_ratio) < 1:
        raise TextError(f"workload.bench.range_ratio={b.range_ratio} must be in [0, 1)")
    for key in ("input_len", "output_len", "max_concurrency", "prompts_per_group"):
        if int(b[key]) < 0:
            raise TextError(f"workload.bench.{key}={b[key]} must be >= 0 (0 = unset)")
    if int(b.repeat_count) < 1:
        raise TextError(
            f"workload.bench.repeat_count={b.repeat_count} must be >= 1 (1 = no repeat)"
        )
    if any(int(i) < 0 for i in w.skip):
        raise TextError(f"workload.skip={list(w.skip)} holds a negative prompt index")
    for key in ("time_scale", "token_scale"):
        if not float(t[key]) > 0:
            raise TextError(f"workload.trace.{key}={t[key]} must be positive")
    if float(t.window_start_s) < 0 or float(t.window_s) < 0:
        raise TextError("workload.trace.window_start_s and workload.trace.window_s must be >= 0")


def check_workload(cfg) -> None:
    from ppx.frontend.kinds import WORKLOADS
    from ppx.frontend.trace_formats import TraceError
    from ppx.frontend.traces import load

    w = cfg.workload
    check_knobs(w)
    check_text(cfg)
    if WORKLOADS.of(cfg).trace:
        if int(w.bench.repeat_count) != 1:  # a trace's rows are its own requests, each once
            raise TextError(
                f"workload.bench.repeat_count={w.bench.repeat_count}: workload=trace replays "
                "each row once, at its own time (repeat_count is for generated or file prompts)"
            )
        if list(w.skip):  # likewise: a row is a time, not a prompt index to leave out
            raise TextError(f"workload.skip={list(w.skip)}: workload=trace replays every row")
        try:
            w.num_requests = load(cfg).count
        except TraceError as e:
            raise TextError(str(e)) from None
