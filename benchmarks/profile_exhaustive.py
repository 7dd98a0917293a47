"""Where an exhaustive search's time goes: cProfile around one whole search, top functions.

  python benchmarks/profile_exhaustive.py [--flip] [--top 30] [--set OVERRIDE ...]

Runs bench_exhaustive.py's scenario (decision + decision_first at pp=3, 3 requests, max_new
2, idle clock; `--flip`: with one flip) under cProfile and prints the functions by own time,
then by cumulative time: the state digest (`Pickler.dump`, fingerprint_forms.Reader) beside
the engine's replays (`Runner.run`). The profiler slows Python-heavy code more than C
code, so read the shares, not the total (a benchmark times the total).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time

import _method
import _zoo
from bench_exhaustive import ONE_FLIP, SCENARIO


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flip", action="store_true")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--set", nargs="*", default=[])
    args = ap.parse_args()
    _method.pin_threads()
    from ppx.sim.explore import explore

    cfg = _zoo.explorer_compose(*SCENARIO, "explore.schedules=1000000",
                                *(ONE_FLIP if args.flip else []), *args.set)  # fmt: skip
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    ex = explore(cfg, tempfile.mkdtemp(prefix="ppx-prof-"), [], echo=lambda *_: None)
    prof.disable()
    d = ex.dfs
    print(f"{d['verdict']}: {d['states']} states, {d['transitions']} transitions, {d['runs']} "
          f"runs (+{d['blocked']} cut) in {time.perf_counter() - t:.1f} s under the profiler")  # fmt: skip
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    _method.print_machine()


if __name__ == "__main__":
    main()
