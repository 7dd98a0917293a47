"""decision and forwarded against rank_local without divergence, side by side in one run.
python benchmarks/bench_admission.py [--reps 2]   (aim: >= 0.95)"""

from __future__ import annotations

import argparse

import _common

LOAD = [
    "pp=3",
    "workload=shared_prefix",
    "workload.num_requests=24",
    "workload.concurrency=8",
    "workload.max_new=32",
]
POLICIES = {
    "rank_local": ["engine/admission=rank_local", "engine/ordering=upstream"],
    "decision": ["engine/admission=decision", "engine/ordering=decision_first"],
    "forwarded": ["engine/admission=forwarded", "engine/ordering=decision_first"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    got: dict[str, list[float]] = {k: [] for k in POLICIES}
    for _ in range(args.reps):
        for name, ov in POLICIES.items():
            s, _ = _common.run(*LOAD, *ov)
            assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s["reason"]
            got[name].append(s["out_tok_s"])
    base = sum(got["rank_local"]) / args.reps
    print(f"out_tok_s over {args.reps} interleaved reps (pp=3, shared_prefix, no divergence)")
    print(f"{'policy':>11} {'out_tok_s':>10} {'vs rank_local':>14}")
    for name, vals in got.items():
        mean = sum(vals) / len(vals)
        print(f"{name:>11} {mean:>10.1f} {mean / base:>14.2f}")


if __name__ == "__main__":
    main()
