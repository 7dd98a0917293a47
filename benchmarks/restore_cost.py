"""What restoring a state costs beside replaying to it: the exhaustive search's floor.

  python benchmarks/restore_cost.py [--rounds 8] [--batch 20]

The exhaustive search (ppx/sim/exhaustive.py) is stateless: every run replays its prefix
from the start, so a distinct state costs about one run of the engine. Issue 31 asks for
>= 5,000 distinct states/s per core, 0.2 ms a state. A stateful search would restore a
state instead of replaying to it; the rank loops are greenlets, whose stacks cannot be
copied, so in this process the one restore there is is a fork at the state (the child
explores on, the parent keeps the state). This script times, interleaved (_method.py), in
the explorer's own process (conf/explorer.yaml, pp=3, the hash model, its Runner built):

- `schedule`: the wall ms of one random schedule (`Runner.run`, seeds in turn), a batch of
  `--batch` per round;
- `fork`: the wall ms of `os.fork` + `os._exit(0)` in the child + `waitpid`, the least a
  fork-per-state search pays per state, a batch of `--batch` per round;

then per arm the median and its 95 % interval, fork / schedule per round, and both beside
the 0.2 ms a state may cost at the issue's rate.
"""

from __future__ import annotations

import argparse
import os
import time

import _method
import _zoo

TARGET_MS = 1000 / 5000  # issue 31: >= 5,000 distinct states/s per core


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--batch", type=int, default=20)
    args = ap.parse_args()
    _method.pin_threads()
    from ppx.sim.runner import Runner
    from ppx.sim.strategy import RandomStrategy

    runner = Runner(_zoo.explorer_compose("pp=3", "model=hash"))
    seed = [0]

    def schedule() -> float:
        t = time.perf_counter()
        for _ in range(args.batch):
            runner.run(RandomStrategy(seed[0]))
            seed[0] += 1
        return (time.perf_counter() - t) * 1e3 / args.batch

    def fork() -> float:
        t = time.perf_counter()
        for _ in range(args.batch):
            pid = os.fork()
            if pid == 0:  # the child: nothing of the parent's cleanup may run twice
                os._exit(0)
            os.waitpid(pid, 0)
        return (time.perf_counter() - t) * 1e3 / args.batch

    got = _method.interleave({"schedule": schedule, "fork": fork}, args.rounds)
    print(f"\nwall ms per operation, {args.rounds} interleaved rounds of {args.batch}")
    for arm, xs in got.items():
        med, lo, hi, cov = _method.median_ci(xs)
        print(f"  {arm:<9} median {med:7.2f} ms, {100 * cov:.1f} % interval [{lo:.2f}, {hi:.2f}]"
              f"; {med / TARGET_MS:5.1f} x the {TARGET_MS:.1f} ms a state may cost")  # fmt: skip
    ratios = [f / s for f, s in zip(got["fork"], got["schedule"])]
    med, lo, hi, cov = _method.median_ci(ratios)
    print(f"  fork / schedule: median {med:.3f}, {100 * cov:.1f} % interval [{lo:.3f}, {hi:.3f}]")
    _method.print_machine()


if __name__ == "__main__":
    main()
