"""Where a random schedule's time goes: one worker's schedules, timed, then under cProfile.

  python benchmarks/profile_schedules.py [--schedules 300] [--top 40] [--set OVERRIDE ...]

Builds the explorer's Runner once (as a worker does: conf/explorer.yaml, pp=3, the hash model)
and runs `--schedules` random schedules (seeds 0..n-1): first timed alone (`time.process_time`
per schedule: the CPU one schedule costs one worker), then again under cProfile, printing the
functions by own time and by cumulative time. The profiler slows Python-heavy code more than
C code, so read the shares, not the total (bench_schedules.py times the total).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import _method
import _zoo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedules", type=int, default=300)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--set", nargs="*", default=[])
    args = ap.parse_args()
    _method.pin_threads()
    from ppx.sim.runner import Runner
    from ppx.sim.strategy import RandomStrategy

    runner = Runner(_zoo.explorer_compose("pp=3", "model=hash", *args.set))
    runner.run(RandomStrategy(-1))  # first-call costs (imports, allocator) outside the figures
    cpu = []
    for seed in range(args.schedules):
        t = time.process_time()
        runner.run(RandomStrategy(seed))
        cpu.append((time.process_time() - t) * 1e3)
    print(f"{args.schedules} schedules, CPU ms per schedule: median {statistics.median(cpu):.2f}, "
          f"mean {statistics.fmean(cpu):.2f}, min {min(cpu):.2f}")  # fmt: skip
    prof = cProfile.Profile()
    prof.enable()
    for seed in range(args.schedules):
        runner.run(RandomStrategy(seed))
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    _method.print_machine()


if __name__ == "__main__":
    main()
