"""Reading Flight Recorder dumps back (ppx's or torch's own): the ops a rank started that no
other member of its process group joined, in the recorder's terms (group, op, sequence id,
state, the ranks missing) -- what `torchfrtrace` reports as "not all ranks joining"."""

from __future__ import annotations

import ast
import os
import pickle
from dataclasses import dataclass

PREFIX = "ppx_fr_"  # the dumps' file names: <prefix><rank>, as torch's analyzer reads them


@dataclass(frozen=True)
class Missing:
    process_group: str
    profiling_name: str
    seq: int
    state: str
    rank: int
    missing_ranks: tuple[int, ...]


def load_dumps(fr_dir: str, prefix: str) -> dict[int, dict]:
    out = {}
    for name in sorted(os.listdir(fr_dir)) if os.path.isdir(fr_dir) else []:
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            with open(os.path.join(fr_dir, name), "rb") as f:
                out[int(name[len(prefix) :])] = pickle.load(f)
    return out


def _seq(e: dict) -> int:
    return e["p2p_seq_id"] if e.get("is_p2p") else e["collective_seq_id"]


def missing_ranks(dumps: dict[int, dict]) -> list[Missing]:
    """Every unfinished entry whose (group, sequence id) some member's dump lacks."""
    seen: dict[tuple[str, int], set[int]] = {}
    for r, d in dumps.items():
        for e in d["entries"]:
            seen.setdefault((e["process_group"][0], _seq(e)), set()).add(r)
    rows = []
    for r, d in sorted(dumps.items()):
        for e in d["entries"]:
            if e["state"] == "completed":
                continue
            pg = e["process_group"][0]
            members = set(ast.literal_eval(d["pg_config"][pg]["ranks"]))
            gone = tuple(sorted(members - seen[(pg, _seq(e))]))
            if gone:
                rows.append(Missing(pg, e["profiling_name"], _seq(e), e["state"], r, gone))
    return rows
