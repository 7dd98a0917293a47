"""The local run store: the source of truth for analysis (W&B offline is binary)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

METRIC_COLUMNS = [
    "t_s",
    "rank",
    "phase",
    "epoch",
    "passes",
    "tokens",
    "finished",
    "voids",
    "flips",
    "retractions",
    "out_tok_s",
]
EVENT_COLUMNS = ["t_s", "rank", "kind", "pass_id", "slot", "rid", "epoch", "detail"]
REQUEST_COLUMNS = [
    "rid",
    "prompt_len",
    "output_len",
    "output_ids",
    "ttft_ms",
    "itl_ms",
    "outcome",
    "reason",
    "submit_t_s",
    "finish_t_s",
    "cached_tokens",
    "prompt_text",  # null unless the model has a tokenizer
    "output_text",
]


def write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=str)
    os.replace(tmp, path)


REQUEST_SCHEMA = pa.schema(
    [
        ("rid", pa.int64()),
        ("prompt_len", pa.int64()),
        ("output_len", pa.int64()),
        ("output_ids", pa.list_(pa.int64())),
        ("ttft_ms", pa.float64()),
        ("itl_ms", pa.float64()),
        ("outcome", pa.string()),
        ("reason", pa.string()),
        ("submit_t_s", pa.float64()),
        ("finish_t_s", pa.float64()),
        ("cached_tokens", pa.int64()),
        ("prompt_text", pa.string()),
        ("output_text", pa.string()),
    ]
)


def write_table(path: str, rows: list[dict], columns: list[str]) -> None:
    if columns is REQUEST_COLUMNS:
        table = pa.Table.from_pylist(
            [{c: r.get(c) for c in columns} for r in rows], schema=REQUEST_SCHEMA
        )
    else:
        table = pa.Table.from_pandas(pd.DataFrame(rows, columns=columns), preserve_index=False)
    pq.write_table(table, path)


def write_run(
    run_dir: str, summary: dict, metrics: list[dict], events: list[dict], requests: list[dict]
) -> None:
    write_table(os.path.join(run_dir, "metrics.parquet"), metrics, METRIC_COLUMNS)
    write_table(os.path.join(run_dir, "events.parquet"), events, EVENT_COLUMNS)
    write_table(os.path.join(run_dir, "requests.parquet"), requests, REQUEST_COLUMNS)
    write_json(os.path.join(run_dir, "summary.json"), summary)
