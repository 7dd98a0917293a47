"""The decision wire codec: entries as an int64 [n, cols] tensor (lengths, never pointers).

Columns are appended, never reordered: a reader that knows fewer columns decodes a wider row
by taking the ones it knows, so a newer rank 0 can talk to an older follower.
"""

from __future__ import annotations

import torch

from ppx.core import Entry

COLUMNS = ("rid", "prefix_len", "extend_len", "final", "continues")
REQUIRED = 4  # a writer from before `continues` sends four columns; the fifth reads as 0
MODES = {"none": 0, "prefill": 1, "decode": 2}
MODE_NAMES = {v: k for k, v in MODES.items()}


def encode(entries: list[Entry], extra: list[list[int]] | None = None) -> torch.Tensor:
    rows = [
        [e.rid, e.prefix_len, e.extend_len, int(e.final), int(e.continues)]
        + (extra[i] if extra else [])
        for i, e in enumerate(entries)
    ]
    width = len(COLUMNS) + (len(extra[0]) if extra else 0)
    return torch.tensor(rows, dtype=torch.int64).reshape(len(rows), width)


def decode(t: torch.Tensor) -> list[Entry]:
    if t.dim() != 2 or (t.numel() and t.shape[1] < REQUIRED):
        raise ValueError(f"decision tensor of shape {tuple(t.shape)}: need >= {REQUIRED} columns")
    rows = t[:, : len(COLUMNS)].tolist()
    return [
        Entry(int(r[0]), int(r[1]), int(r[2]), bool(r[3]), bool(r[4]) if len(r) > 4 else False)
        for r in rows
    ]
