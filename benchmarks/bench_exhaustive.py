"""Exhaustive exploration, measured (printed, never asserted):

1. the issue's scenario, decision + decision_first at pp=3, 3 requests, max_new 2, on the
   idle clock, `--rounds` interleaved rounds (benchmarks/_method.py) of two arms: `canon`
   (the digest as it is: the wire's queues and a collective's parts in canonical order)
   and `insertion` (the same digest with those two written in pickle's own order, as
   before the canonical forms). Per round: verdict, distinct states, transitions, runs,
   wall seconds, and distinct states per CPU second of this process (one process: one
   core; the CPU second, not the wall one, because the machine is shared); then the
   median and its interval, and the ratio of the arms
2. the same scenario with one flip (flip every 2 passes, at most 1), once per arm
3. the random strategy with two workers, `python -m ppx.explore pp=3 explore.fanout.workers=2`,
   `--rounds` times: schedules/s, median and interval

  python benchmarks/bench_exhaustive.py [--rounds 6] [--skip-flip]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import _common
import _method
import _zoo

SCENARIO = ["pp=3", "engine/admission=decision", "engine/ordering=decision_first",
            "workload.num_requests=3", "workload.max_new=2", "explore.clock=idle",
            "explore.strategy=exhaustive", "explore.shrinker.runs=0"]  # fmt: skip
ONE_FLIP = ["flip=every_40_passes", "flip.every_passes=2", "flip.max_flips=1"]
ARMS = {"canon": True, "insertion": False}  # the canonical forms on / off


def search(*overrides: str, canon: bool = True) -> dict:
    from ppx.engine.transport.sim import SimWire, _Collective
    from ppx.sim import fingerprint_forms as forms
    from ppx.sim.explore import explore

    readers = {
        tp: forms._reader_of(tp) if canon else forms._default for tp in (SimWire, _Collective)
    }
    forms._READERS.update(readers)
    cfg = _zoo.explorer_compose(*SCENARIO, *overrides)
    t, cpu = time.perf_counter(), time.process_time()
    ex = explore(cfg, tempfile.mkdtemp(prefix="ppx-exh-"), [], echo=lambda *_: None)
    d = dict(ex.dfs)
    d["wall_s"], d["cpu_s"] = round(time.perf_counter() - t, 2), round(time.process_time() - cpu, 2)
    d["per_cpu_s"] = round(d["states"] / d["cpu_s"], 1)
    return d


def line(name: str, d: dict) -> str:
    return (f"   {name:<9} {d['verdict']:<9} states {d['states']}  transitions "
            f"{d['transitions']}  runs {d['runs']} (+{d['blocked']} cut)  depth {d['depth']}  "
            f"wall {d['wall_s']:.1f} s  cpu {d['cpu_s']:.1f} s  {d['per_cpu_s']} states per "
            f"cpu s  ends {d['ends']}")  # fmt: skip


def scenario(args) -> None:
    print(f"\n1. {' '.join(SCENARIO)}")
    runs: dict[str, list[dict]] = {a: [] for a in ARMS}

    def arm(name: str):
        def go() -> float:
            d = search("explore.schedules=1000000", canon=ARMS[name])
            runs[name].append(d)
            print(line(name, d), flush=True)
            return d["per_cpu_s"]

        return go

    got = _method.interleave({a: arm(a) for a in ARMS}, args.rounds, warmup=0)
    for name, ds in runs.items():
        for key, what in (("wall_s", "wall s"), ("cpu_s", "cpu s"), ("per_cpu_s", "states/cpu s")):
            med, lo, hi, cov = _method.median_ci([d[key] for d in ds])
            print(f"   {name}: {what} median {med:.1f}, {100 * cov:.0f} % interval [{lo:.1f}, "
                  f"{hi:.1f}]; states {sorted({d['states'] for d in ds})}")  # fmt: skip
    _method.report(got, "insertion", "distinct states per cpu second", 1.0)
    print("   targets: verified in <= 60 s; >= 5,000 distinct states/s per core")


def flip(args) -> None:
    print(f"\n2. the same with one flip ({' '.join(ONE_FLIP)})")
    for name, canon in ARMS.items():
        print(line(name, search("explore.schedules=1000000", *ONE_FLIP, canon=canon)), flush=True)


def random_two_workers(args) -> None:
    cmd = [
        "python",
        "-m",
        "ppx.explore",
        "pp=3",
        "explore.schedules=1000",
        "explore.fanout.workers=2",
    ]
    print(f"\n3. {' '.join(cmd)}")
    rates = []
    for i in range(args.rounds):
        out = tempfile.mkdtemp(prefix="ppx-explore-")
        subprocess.run([sys.executable, *cmd[1:], f"hydra.run.dir={out}"], cwd=_common.ROOT,
                       check=True, capture_output=True)  # fmt: skip
        s = json.load(open(os.path.join(out, "summary.json")))
        rates.append(s["schedules_per_s"])
        print(f"   round {i + 1}/{args.rounds}: {s['schedules']} schedules in {s['wall_s']} s "
              f"= {s['schedules_per_s']} schedules/s; verdicts {s['verdicts']}", flush=True)  # fmt: skip
    med, lo, hi, cov = _method.median_ci(rates)
    print(
        f"   schedules/s median {med:.1f}, {100 * cov:.0f} % interval [{lo:.1f}, {hi:.1f}] "
        "(target >= 500)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
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
