"""Cost of the blocked-on records (and op ring): decode throughput with them on and off,
arms interleaved.

  python benchmarks/bench_board.py [--reps 8] [--pp 3]
  (target: on/off >= 0.97 with an interval that excludes 0.9; see _method.py)
"""

from __future__ import annotations

import argparse

import _common
import _method


def arm(pp: int, on: bool):
    def run() -> float:
        load = _common.decode_load(pp, 8, 16, 48, requests=16)
        s, run_dir = _common.run(*load, f"watch.blocked_on={str(on).lower()}")
        assert s["verdict"] == "served", s["reason"]
        return _common.decode_tok_s(run_dir)

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=8, help="interleaved rounds (>= 6 for a CI)")
    ap.add_argument("--pp", type=int, default=3)
    args = ap.parse_args()
    _method.print_machine()
    got = _method.interleave({"off": arm(args.pp, False), "on": arm(args.pp, True)}, args.reps)
    _method.report(
        got,
        "off",
        f"decode tokens/s at pp={args.pp} (each token is one pass of its slot)",
        target=0.97,
        exclude=0.9,
    )


if __name__ == "__main__":
    main()
