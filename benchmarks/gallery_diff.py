"""Diff two runs of a gallery study cell by cell: verdict, reason, served, voids (and the
other counters of the table) per (incident, arm). The check of a behaviour-preserving
refactor: run the study before and after, then

    python benchmarks/gallery_diff.py BEFORE/table.csv AFTER/table.csv

prints every cell whose row differs (none: `0 of N cells differ`) and exits 1 when any does.
Throughput and latency columns are wall-clock and are left out."""

from __future__ import annotations

import sys

import pandas as pd

KEYS = ["incident", "arm"]
SAME = ["verdict", "reason", "served", "submitted", "voids", "flips", "retractions", "refusals"]
SAME += ["stops", "oracle_mismatches", "cycle"]


def rows(path: str) -> pd.DataFrame:
    df = pd.read_csv(path)
    return df.set_index(KEYS)[[c for c in SAME if c in df]].fillna("")


def main(before: str, after: str) -> int:
    a, b = rows(before), rows(after)
    cells = sorted(set(a.index) | set(b.index))
    diffs = []
    for cell in cells:
        if cell not in a.index or cell not in b.index:
            diffs.append((cell, "only in " + ("after" if cell not in a.index else "before"), ""))
            continue
        ra, rb = a.loc[cell], b.loc[cell]
        for col in a.columns:
            if str(ra[col]) != str(rb[col]):
                diffs.append((cell, col, f"{ra[col]!s:.120} -> {rb[col]!s:.120}"))
    for cell, col, what in diffs:
        print(f"{' / '.join(map(str, cell))}: {col}: {what}")
    changed = len({d[0] for d in diffs})
    print(f"{changed} of {len(cells)} cells differ ({', '.join(SAME)})")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
