"""Exhaustive exploration, measured (printed, never asserted):

1. the issue's scenario, decision + decision_first at pp=3, 3 requests, max_new 2, on the
   idle clock: verdict, distinct states, transitions, runs, wall seconds and distinct
   states per second (the hash model, one process: one core), `--rounds` times, median and
   range; the reduction's arms side by side in each round (cached: sleep sets + visited
   set; sleep: sleep sets alone), interleaved (benchmarks/_method.py)
2. the same scenario with one flip (flip every 2 passes, at most 1), under a cap of
   `--flip-cap` runs: verified, or the bound it reached
3. the random strategy with two workers: `python -m ppx.explore pp=3 explore.workers=2`

  python benchmarks/bench_exhaustive.py [--rounds 3] [--flip-cap 20000] [--skip-flip]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import _common
import _method
import _zoo

SCENARIO = ["pp=3", "engine/admission=decision", "engine/ordering=decision_first",
            "workload.num_requests=3", "workload.max_new=2", "explore.clock=idle",
            "explore.strategy=exhaustive", "explore.shrink=0"]  # fmt: skip
ONE_FLIP = ["flip=every_40_passes", "flip.every_passes=2", "flip.max_flips=1"]
ARMS = {"cached": ["explore.cache=true"], "sleep": ["explore.cache=false"]}


def search(*overrides: str) -> dict:
    from ppx.sim.explore import explore

    cfg = _zoo.explorer_compose(*SCENARIO, *overrides)
    t = time.perf_counter()
    ex = explore(cfg, tempfile.mkdtemp(prefix="ppx-exh-"), [], echo=lambda *_: None)
    d = dict(ex.dfs)
    d["wall_s"] = round(time.perf_counter() - t, 2)
    return d


def line(name: str, d: dict) -> str:
    return (f"   {name:<7} {d['verdict']:<9} states {d['states']}  transitions "
            f"{d['transitions']}  runs {d['runs']} (+{d['blocked']} cut)  depth {d['depth']}  "
            f"{d['wall_s']:7.1f} s  {d['states_per_s']} states/s  ends {d['ends']}")  # fmt: skip


def scenario(args) -> None:
    print(f"\n1. {' '.join(SCENARIO)}")
    walls: dict[str, list[float]] = {a: [] for a in ARMS}
    rates: list[float] = []
    for i in range(args.rounds):
        order = list(ARMS.items())
        for name, ov in order[::-1] if i % 2 else order:
            d = search("explore.schedules=1000000", *ov)
            walls[name].append(d["wall_s"])
            if name == "cached":
                rates.append(d["states"] / d["wall_s"])
            print(f"  round {i + 1}/{args.rounds}" + line(name, d), flush=True)
    for name, xs in walls.items():
        print(f"   {name}: wall median {statistics.median(xs):.1f} s [{min(xs):.1f}, "
              f"{max(xs):.1f}]  (target: verified in <= 60 s)")  # fmt: skip
    print(f"   cached: distinct states/s median {statistics.median(rates):.1f} "
          f"[{min(rates):.1f}, {max(rates):.1f}] on one core (target >= 5,000)")  # fmt: skip


def flip(args) -> None:
    print(f"\n2. the same with one flip ({' '.join(ONE_FLIP)}), at most {args.flip_cap} runs")
    d = search(f"explore.schedules={args.flip_cap}", *ONE_FLIP)
    print(line("cached", d))


def random_two_workers(args) -> None:
    out = tempfile.mkdtemp(prefix="ppx-explore-")
    cmd = ["python", "-m", "ppx.explore", "pp=3", "explore.schedules=1000",
           "explore.workers=2", f"hydra.run.dir={out}"]  # fmt: skip
    subprocess.run([sys.executable, *cmd[1:]], cwd=_common.ROOT, check=True, capture_output=True)
    s = json.load(open(os.path.join(out, "summary.json")))
    print(f"\n3. {' '.join(cmd[:-1])}\n   -> {s['schedules']} schedules in {s['wall_s']} s = "
          f"{s['schedules_per_s']} schedules/s (target >= 500); verdicts {s['verdicts']}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--flip-cap", type=int, default=20000)
    ap.add_argument("--skip-flip", action="store_true")
    args = ap.parse_args()
    _method.pin_threads()
    _method.print_machine()
    scenario(args)
    if not args.skip_flip:
        flip(args)
    random_two_workers(args)
    _method.print_machine()


if __name__ == "__main__":
    main()
