"""Where a random schedule's time goes: one worker's schedules, timed, then under cProfile.

  python benchmarks/profile_schedules.py [--schedules 300] [--top 40] [--set OVERRIDE ...]
                                        [--parts] [--no-profile] [--torch-calls]

Builds the explorer's Runner once (as a worker does: conf/explorer.yaml, pp=3, the hash model)
and runs `--schedules` random schedules (seeds 0..n-1): first timed alone (`time.process_time`
per schedule: the CPU one schedule costs one worker), then again under cProfile, printing the
functions by own time and by cumulative time. The profiler slows Python-heavy code more than
C code, so read the shares, not the total (bench_schedules.py times the total). `--parts`:
first the CPU ms per schedule spent inside a few named functions (PARTS; wrapped with
`time.process_time`, no profiler), beside the schedule's total. `--torch-calls`: the torch calls
per schedule (a TorchFunctionMode that counts what it sees: functions and tensor methods,
attribute reads such as `.shape` too; `frombuffer` is not seen) by the ppx function that made
them. cProfile does not see into the rank loops' greenlets well (the schedule's wall is
charged to the switch); a sampling profiler does: `py-spy record -r 1000 -f raw -o OUT --
python SCRIPT` over a loop of `Runner.run`, its stacks summed per function and per line.
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


def torch_calls(runner, n: int, top: int) -> None:
    """Torch calls per schedule, by the calling ppx function and by (function, call)."""
    import collections
    import sys

    from torch.overrides import TorchFunctionMode

    from ppx.sim.strategy import RandomStrategy

    seen: collections.Counter = collections.Counter()

    class Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            f = sys._getframe(1)
            while f is not None and "torch/" in f.f_code.co_filename:
                f = f.f_back
            where = f"{f.f_code.co_filename.rsplit('ppx/', 1)[-1]}:{f.f_code.co_name}" if f else "?"
            seen[where, getattr(func, "__name__", str(func))] += 1
            return func(*args, **(kwargs or {}))

    with Count():
        for seed in range(n):
            runner.run(RandomStrategy(seed))
    by_caller: collections.Counter = collections.Counter()
    for (where, _), c in seen.items():
        by_caller[where] += c
    print(f"torch calls per schedule: {sum(seen.values()) / n:.0f}")
    for where, c in by_caller.most_common(top):
        print(f"  {c / n:7.1f}  {where}")
    for (where, fn), c in seen.most_common(top):
        print(f"  {c / n:7.1f}  {where} {fn}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedules", type=int, default=300)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--set", nargs="*", default=[])
    ap.add_argument("--parts", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--torch-calls", action="store_true")
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
    if args.torch_calls:
        torch_calls(runner, min(args.schedules, 50), args.top)
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
