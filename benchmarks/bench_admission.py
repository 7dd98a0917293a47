"""decision and forwarded against rank_local without divergence, arms interleaved.

  python benchmarks/bench_admission.py [--reps 8] [--pp 3]   (target: >= 0.97)

out_tok_s of each policy on the same shared-prefix load (every token checked by the oracle);
the median per-round ratio to rank_local with its 95 % interval (see _method.py).
"""

from __future__ import annotations

import argparse

import _common
import _method

LOAD = [
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


def arm(pp: int, overrides: list[str]):
    def run() -> float:
        s, _ = _common.run(f"pp={pp}", *LOAD, *overrides)
        assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s["reason"]
        return s["out_tok_s"]

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=8, help="interleaved rounds (>= 6 for a CI)")
    ap.add_argument("--pp", type=int, default=3)
    args = ap.parse_args()
    _method.print_machine()
    arms = {name: arm(args.pp, ov) for name, ov in POLICIES.items()}
    got = _method.interleave(arms, args.reps)
    _method.report(
        got, "rank_local", f"out_tok_s, pp={args.pp}, shared_prefix, no divergence", target=0.97
    )


if __name__ == "__main__":
    main()
