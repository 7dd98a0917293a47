"""The liveness check of the exhaustive search, measured (printed, never asserted):

1. its cost: the issue's scenario (decision + decision_first, pp=3, 3 requests, max_new 2,
   idle clock; verified, no cycle), `--rounds` interleaved rounds (benchmarks/_method.py)
   of `explore.exhaustive.liveness=true` and `false`: distinct states per CPU second of this process
   (one process, one core; CPU seconds because the machine is shared), median, interval
   and the ratio of the arms;
2. what it finds: the gallery's #630 told sequence (2 requests, max_new 1, the cell's own
   `engine.liveness.livelock_passes=24`), red and green, once each: verdict, states, wall, and per
   failure its trace (the fair cycle's: steps to the cycle's entry; the pass-count bound's:
   steps to the bound's stop).

  python benchmarks/bench_liveness.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import _method
import _zoo
from bench_exhaustive import SCENARIO
from bench_exhaustive import search as search_scenario

BOUND = ["workload.num_requests=2", "workload.max_new=1", "explore.clock=idle",
         "explore.strategy=exhaustive", "explore.shrinker.runs=0", "explore.schedules=20000"]  # fmt: skip


def search(cfg) -> dict:
    from ppx.sim.explore import explore

    t = time.perf_counter()
    d = dict(explore(cfg, tempfile.mkdtemp(prefix="ppx-live-"), [], echo=lambda *_: None).dfs)
    return d | {"wall_s": round(time.perf_counter() - t, 2)}


def cost(args) -> None:
    print(f"\n1. {' '.join(SCENARIO)}, explore.exhaustive.liveness on / off")
    runs: dict[str, list[dict]] = {"on": [], "off": []}

    def arm(name: str):
        def go() -> float:
            on = str(name == "on").lower()
            d = search_scenario("explore.schedules=1000000", f"explore.exhaustive.liveness={on}")
            runs[name].append(d)
            print(f"   {name:<4} {d['verdict']} states {d['states']} transitions "
                  f"{d['transitions']} cycles {len(d['livelock'])} wall {d['wall_s']} s cpu "
                  f"{d['cpu_s']} s {d['per_cpu_s']} states per cpu s", flush=True)  # fmt: skip
            return d["per_cpu_s"]

        return go

    got = _method.interleave({a: arm(a) for a in runs}, args.rounds, warmup=0)
    for name, ds in runs.items():
        med, lo, hi, cov = _method.median_ci([d["per_cpu_s"] for d in ds])
        print(f"   {name}: states/cpu s median {med:.1f}, {100 * cov:.0f} % interval [{lo:.1f}, "
              f"{hi:.1f}]")  # fmt: skip
    ratios = [a / b for a, b in zip(got["on"], got["off"], strict=True)]
    med, lo, hi, cov = _method.median_ci(ratios)
    print(f"   on/off per round: {[round(r, 3) for r in ratios]}; median {med:.3f}, "
          f"{100 * cov:.0f} % interval [{lo:.3f}, {hi:.3f}] (no target: the check's cost)")  # fmt: skip


def finds() -> None:
    from ppx.sim.gallery import cells

    print("\n2. #630 told sequence, " + " ".join(BOUND))
    for name, arm, ov in cells("#630 told sequence"):
        if name != "#630 told sequence":
            continue
        d = search(_zoo.explorer_compose(*ov, *BOUND))
        print(f"   {arm:<5} {d['verdict']} states {d['states']} transitions {d['transitions']} "
              f"depth {d['depth']} wall {d['wall_s']} s", flush=True)  # fmt: skip
        for key, t in d["traces"].items():
            print(f"      trace {t['trace_len']:>4} steps  {key[:90]}")
        for c in d["livelock"]:
            print(f"      cycle: confirmed {c['confirmed']} lap {c['lap_len']} steps, "
                  f"{c['abstract_states']} abstract states, pumped to: {c['pumped'][:70]}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    _method.pin_threads()
    _method.print_machine()
    finds()
    cost(args)
    _method.print_machine()


if __name__ == "__main__":
    main()
