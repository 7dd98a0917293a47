"""Cutover time against pass time, side by side: what a flip costs in passes.
python benchmarks/bench_flip.py [--pp 3]"""

from __future__ import annotations

import argparse
import os

import _common
import pandas as pd


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pp", type=int, default=3)
    args = ap.parse_args()
    print(f"pp={args.pp}, shared_prefix load, a flip every 15 passes")
    print(
        f"{'inflight':>9} {'flips':>6} {'pass_ms':>8} {'cutover_p50':>12} {'cutover_max':>12} {'p50/pass':>9}"
    )
    for mode in ("drain", "void"):
        s, run_dir = _common.run(
            f"pp={args.pp}",
            "workload.num_requests=32",
            "workload.concurrency=6",
            "workload.max_new=8",
            "flip=every_40_passes",
            "flip.every_passes=15",
            f"flip.inflight={mode}",
        )
        assert s["verdict"] == "served", s["reason"]
        m = pd.read_parquet(os.path.join(run_dir, "metrics.parquet"))
        r0 = m[(m["rank"] == 0) & (m["passes"] > 0)]
        pass_ms = (
            1e3
            * (r0.t_s.iloc[-1] - r0.t_s.iloc[0])
            / max(r0.passes.iloc[-1] - r0.passes.iloc[0], 1)
        )
        p50 = s["cutover_ms_p50"]
        print(
            f"{mode:>9} {s['flips']:>6} {pass_ms:>8.1f} {p50:>12.1f} {s['cutover_ms_max']:>12.1f} {p50 / pass_ms:>9.1f}"
        )


if __name__ == "__main__":
    main()
