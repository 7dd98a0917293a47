"""Where a random schedule's time goes: one worker's schedules, timed, then under cProfile.

  python benchmarks/profile_schedules.py [--schedules 300] [--top 40] [--set OVERRIDE ...]
                                        [--parts] [--no-profile]

Builds the explorer's Runner once (as a worker does: conf/explorer.yaml, pp=3, the hash model)
and runs `--schedules` random schedules (seeds 0..n-1): first timed alone (`time.process_time`
per schedule: the CPU one schedule costs one worker), then again under cProfile, printing the
functions by own time and by cumulative time. The profiler slows Python-heavy code more than
C code, so read the shares, not the total (bench_schedules.py times the total). `--parts`:
first the CPU ms per schedule spent inside a few named functions (PARTS; wrapped with
`time.process_time`, no profiler), beside the schedule's total.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import _method
import _zoo

PARTS = [  # module, class ("" for a function), function: where a schedule's time goes
    ("ppx.engine.model.hashed", "HashStage", "forward"),
    ("ppx.engine.rank", "RankLoop", "__init__"),
    ("ppx.engine.loop", "PassSteps", "step_schedule"),
    ("ppx.engine.scheduler", "Scheduler", "inputs"),
    ("ppx.engine.rank", "RankLoop", "after_pass"),
    ("ppx.engine.channels", "", "encode_header"),
    ("ppx.engine.channels", "", "decode_header"),
    ("ppx.sim.runner", "Runner", "check"),
]


def parts(runner, n: int) -> None:
    """CPU ms per schedule inside each of PARTS (outermost calls only), and the total."""
    import importlib

    from ppx.sim.strategy import RandomStrategy

    spent = {f"{c}.{f}" if c else f: 0.0 for _, c, f in PARTS}
    for mod, cls, fn in PARTS:
        owner = getattr(importlib.import_module(mod), cls) if cls else importlib.import_module(mod)
        real, key, depth = getattr(owner, fn), f"{cls}.{fn}" if cls else fn, [0]

        def timed(*a, _real=real, _key=key, _depth=depth, **k):
            _depth[0] += 1
            t = time.process_time()
            try:
                return _real(*a, **k)
            finally:
                _depth[0] -= 1
                if not _depth[0]:
                    spent[_key] += time.process_time() - t

        setattr(owner, fn, timed)
    t = time.process_time()
    for seed in range(n):
        runner.run(RandomStrategy(seed))
    total = (time.process_time() - t) * 1e3 / n
    print(f"CPU ms per schedule: {total:.2f} in all")
    for key, s in spent.items():
        print(f"  {key:<28} {s * 1e3 / n:6.2f}  ({100 * s * 1e3 / n / total:.0f} %)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedules", type=int, default=300)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--set", nargs="*", default=[])
    ap.add_argument("--parts", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
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
    if args.no_profile:
        if args.parts:
            parts(runner, args.schedules)
        _method.print_machine()
        return
    prof = cProfile.Profile()
    prof.enable()
    for seed in range(args.schedules):
        runner.run(RandomStrategy(seed))
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    if args.parts:
        parts(runner, args.schedules)
    _method.print_machine()


if __name__ == "__main__":
    main()
