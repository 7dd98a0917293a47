"""Readers of the public LLM-serving traces, each row to one `TraceRow` (or why not).

- Azure LLM inference (2023, 2024): CSV `TIMESTAMP,ContextTokens,GeneratedTokens`, the
  timestamp a date-time with sub-second digits.
- BurstGPT: CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`, the
  timestamp seconds from the trace's start; a failed request is logged with 0 response
  tokens: skipped and counted (it never produced the load a served request does).
- Mooncake: JSONL `{"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}`,
  one hash id per 512-token block of the prompt; equal ids are equal blocks.

A malformed row is kept as a row with its `file:line: reason`, so the request it stood for
is refused with that reason and the rest are served.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from datetime import datetime

MOONCAKE_BLOCK = 512  # tokens per hash id in the Mooncake traces


class TraceError(ValueError):
    """A trace ppx cannot replay at all; the message names the file and the problem."""


@dataclass(frozen=True)
class TraceRow:
    t_s: float  # seconds on the trace's own clock
    input_len: int
    output_len: int
    where: str  # file:line, for any reason given about this row
    hash_ids: tuple[int, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class Trace:
    path: str
    rows: list[TraceRow]
    failed: int = 0  # BurstGPT rows of failed requests, skipped


def _count(value, name: str) -> int:
    n = int(value)  # ValueError on a non-integer: the caller names the row
    if n < 0:
        raise ValueError(f"{name}={n} is negative")
    return n


def _bad(prev_t: float, where: str, why: str) -> TraceRow:
    # at the previous row's time: a refused request takes no slot in the arrival process
    return TraceRow(prev_t, 0, 0, where, error=f"{where}: {why}")


def _csv_rows(path: str, columns: tuple[str, ...]):
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header[: len(columns)]) != columns:
            raise TraceError(f"{path}: expected the header {','.join(columns)}, got {header}")
        for row in reader:
            if row:
                yield f"{path}:{reader.line_num}", row


def read_azure(path: str) -> Trace:
    rows, t0, prev = [], None, 0.0
    for where, row in _csv_rows(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        try:
            if len(row) != 3:
                raise ValueError(f"{len(row)} columns, expected 3")
            t = datetime.fromisoformat(row[0].strip()).timestamp()
            n_in, n_out = _count(row[1], "ContextTokens"), _count(row[2], "GeneratedTokens")
        except ValueError as e:
            rows.append(_bad(prev, where, str(e)))
            continue
        t0 = t if t0 is None else t0
        prev = t - t0
        rows.append(TraceRow(prev, n_in, n_out, where))
    return Trace(path, rows)


BURSTGPT = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")


def read_burstgpt(path: str) -> Trace:
    rows, failed, prev = [], 0, 0.0
    for where, row in _csv_rows(path, BURSTGPT):
        try:
            if len(row) != len(BURSTGPT):
                raise ValueError(f"{len(row)} columns, expected {len(BURSTGPT)}")
            t = float(row[0])
            n_in = _count(row[2], "Request tokens")
            n_out = _count(row[3], "Response tokens")
        except ValueError as e:
            rows.append(_bad(prev, where, str(e)))
            continue
        if n_out == 0:  # BurstGPT's mark of a failed request
            failed += 1
            continue
        prev = t
        rows.append(TraceRow(t, n_in, n_out, where))
    return Trace(path, rows, failed)


def _mooncake_row(raw: str, where: str, prev: float) -> TraceRow:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        return _bad(prev, where, f"not JSON ({e.msg})")
    if not isinstance(obj, dict):
        return _bad(prev, where, "expected an object")
    missing = [
        k for k in ("timestamp", "input_length", "output_length", "hash_ids") if k not in obj
    ]
    if missing:
        return _bad(prev, where, f"missing {', '.join(missing)}")
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or not all(isinstance(h, int) for h in ids):
        return _bad(prev, where, "hash_ids must be a list of integers")
    try:
        t = float(obj["timestamp"]) / 1e3
        n_in = _count(obj["input_length"], "input_length")
        n_out = _count(obj["output_length"], "output_length")
    except (TypeError, ValueError) as e:
        return _bad(prev, where, str(e))
    if n_in > len(ids) * MOONCAKE_BLOCK:
        return _bad(prev, where, f"input_length={n_in} is longer than its {len(ids)} blocks")
    return TraceRow(t, n_in, n_out, where, tuple(ids))


def read_mooncake(path: str) -> Trace:
    rows, prev = [], 0.0
    with open(path) as f:
        for i, raw in enumerate(f, 1):
            if raw.strip():
                rows.append(_mooncake_row(raw, f"{path}:{i}", prev))
                prev = rows[-1].t_s
    return Trace(path, rows)


READERS = {"azure": read_azure, "burstgpt": read_burstgpt, "mooncake": read_mooncake}


def read_trace(fmt: str, path: str) -> Trace:
    if fmt not in READERS:
        raise TraceError(f"workload.trace.format={fmt!r}: one of {', '.join(READERS)}")
    if not path or not os.path.exists(path):
        raise TraceError(f"{path}: trace file is missing (workload.path=FILE)")
    trace = READERS[fmt](path)
    if not trace.rows:
        raise TraceError(f"{path}: no requests in the trace")
    if all(r.error for r in trace.rows):
        raise TraceError(f"{trace.rows[0].error} (and no row of the trace can be served)")
    return trace
