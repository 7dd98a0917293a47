"""Trace replay: a public trace's rows as ppx requests, at the trace's own arrival times.

`workload=trace workload.trace.format=azure|burstgpt|mooncake workload.path=FILE`. The window
(`window_start_s` after the trace's first request, `window_s` long, at most `num_requests`)
picks the rows; `time_scale` stretches the trace's clock (0.1: ten times faster) and
`token_scale` shrinks its lengths to fit a small model. Prompts are seeded tokens of the
row's length; a Mooncake row's prompt is its blocks, each a pure function of (seed, hash id),
so rows that share hash ids share prompt prefixes and the prefix cache sees the trace's
real sharing.
"""

from __future__ import annotations

import random
import sys
from dataclasses import replace

from ppx.frontend.trace_formats import MOONCAKE_BLOCK, Trace, TraceError, TraceRow, read_trace
from ppx.frontend.workloads import Request, Workload


def window(trace: Trace, start_s: float, length_s: float, limit: int) -> list[TraceRow]:
    """The rows in [start, start + length) of the trace's clock (length 0: to the end), at
    most `limit`, their times made relative to the window's start."""
    t0 = trace.rows[0].t_s + start_s
    rows = [
        replace(r, t_s=r.t_s - t0)
        for r in trace.rows
        if r.t_s >= t0 and (length_s <= 0 or r.t_s < t0 + length_s)
    ]
    return rows[:limit]


class TraceWorkload(Workload):
    def __init__(self, w, trace: Trace, vocab: int, seed: int, max_context: int) -> None:
        self.w, self.vocab, self.seed, self.max_context = w, vocab, seed, max_context
        self.trace = trace
        t = w.trace  # the window and the scales (TraceCfg)
        self.rows = window(trace, float(t.window_start_s), float(t.window_s), int(w.num_requests))
        self.scale = float(t.token_scale)
        self.block = max(1, round(MOONCAKE_BLOCK * self.scale))

    @property
    def count(self) -> int:
        return len(self.rows)

    @property
    def timed(self) -> bool:
        return True  # the trace's timestamps pace the arrivals

    def gap_after(self, rid: int, rng: random.Random) -> float:
        if rid + 1 >= len(self.rows):
            return 0.0
        # a trace out of time order replays its late row at once rather than in the past
        return max(0.0, self.rows[rid + 1].t_s - self.rows[rid].t_s) * float(
            self.w.trace.time_scale
        )

    def _block(self, h: int) -> list[int]:
        rng = random.Random(f"block/{self.seed}/{h}")
        return [rng.randrange(1, self.vocab) for _ in range(self.block)]

    def request(self, i: int) -> Request:
        row = self.rows[i]
        if row.error:
            return Request(i, [], 1, row.error)
        n_in = max(1, round(row.input_len * self.scale))
        n_out = max(1, round(row.output_len * self.scale))
        if n_in + n_out > self.max_context:
            why = f"{row.where}: {n_in} prompt + {n_out} output tokens > model.max_context={self.max_context} (token_scale={self.scale})"  # fmt: skip
            return Request(i, [], n_out, why)
        if row.hash_ids:
            prompt = [t for h in row.hash_ids for t in self._block(h)][:n_in]
        else:
            rng = random.Random(f"req/{self.seed}/{i}")
            prompt = [rng.randrange(1, self.vocab) for _ in range(n_in)]
        return Request(i, prompt, n_out)

    def loader_counts(self) -> dict[str, int]:
        return {
            "trace_rows": len(self.trace.rows),  # the file's, malformed ones included
            "trace_window_rows": len(self.rows),
            "trace_malformed": sum(bool(r.error) for r in self.rows),  # refused, in the window
            "trace_skipped": self.trace.failed,  # BurstGPT's failed requests, never submitted
        }

    def describe(self) -> str:
        n = self.loader_counts()
        return (
            f"ppx: trace {self.trace.path}: {n['trace_rows']} rows, {n['trace_window_rows']} "
            f"in the window, {n['trace_malformed']} malformed (refused), "
            f"{n['trace_skipped']} failed rows skipped"
        )


def load(cfg) -> TraceWorkload:
    """The trace a (validated) config names, windowed; TraceError when nothing is left."""
    w = cfg.workload
    trace = read_trace(str(w.trace.format), str(w.path) if w.path else "")
    wl = TraceWorkload(w, trace, int(cfg.model.vocab), int(cfg.seed), int(cfg.model.max_context))
    if not wl.rows:
        span = trace.rows[-1].t_s - trace.rows[0].t_s
        raise TraceError(
            f"{trace.path}: no request in the window (workload.trace.window_start_s="
            f"{w.trace.window_start_s}, workload.trace.window_s={w.trace.window_s}); the trace spans {span:.3f}s"
        )
    return wl


def make_trace_workload(cfg) -> TraceWorkload:
    wl = load(cfg)
    print(wl.describe(), file=sys.stderr)
    return wl
