"""Cost of the blocked-on records (and op ring): pass throughput with them on and off,
interleaved in one run.   python benchmarks/bench_board.py [--reps 3]   (aim: < 3 % cost)"""

from __future__ import annotations

import argparse

import _common

LOAD = [
    "pp=3",
    "workload=random",
    "workload.num_requests=16",
    "workload.concurrency=8",
    "workload.prompt_min=16",
    "workload.prompt_max=16",
    "workload.max_new=48",
]


def passes_per_s(on: bool) -> float:
    s, run_dir = _common.run(*LOAD, f"watch.blocked_on={str(on).lower()}")
    assert s["verdict"] == "served", s["reason"]
    return _common.decode_tok_s(run_dir)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    on, off = [], []
    for _ in range(args.reps):
        on.append(passes_per_s(True))
        off.append(passes_per_s(False))
    print("decode tokens/s at pp=3 (each token is one pass of its slot)")
    print(f"{'rep':>4} {'records on':>11} {'records off':>12} {'on/off':>7}")
    for i, (a, b) in enumerate(zip(on, off)):
        print(f"{i:>4} {a:>11.1f} {b:>12.1f} {a / b:>7.3f}")
    a, b = sum(on) / len(on), sum(off) / len(off)
    print(
        f"{'mean':>4} {a:>11.1f} {b:>12.1f} {a / b:>7.3f}   cost {100 * (1 - a / b):+.1f} % (aim < 3 %)"
    )


if __name__ == "__main__":
    main()
