"""The simulator against the real thing, side by side in one run (arms interleaved):

1. time to the first wedge, per wedging preset at pp=3: sim vs gloo (aim: sim < 1 s)
2. schedules per second for decision_first at pp=3 (aim: 1000 schedules in < 60 s)
3. `+exp=smoke` wall time: sim vs gloo

  python benchmarks/bench_explore.py [--reps 3] [--schedules 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import _common

WEDGES = ["flush_before_decision", "blocking_lap", "decision_after_launch"]
# the explorer's engine (conf/exp/micro_load.yaml) at pp=3 on the reference ordering
EXPLORE = ["+exp=micro_load", "pp=3", "engine/admission=decision", "engine/ordering=decision_first"]


def timed_run(*overrides: str) -> tuple[float, dict]:
    t = time.perf_counter()
    s, _ = _common.run(*overrides)
    return time.perf_counter() - t, s


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):8.2f} s  [{min(xs):.2f}, {max(xs):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--schedules", type=int, default=1000)
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; reps={args.reps}")

    # one untimed run first: the process's first run pays its imports (matplotlib for the
    # post-mortem picture, the kernels), which is no property of either transport
    timed_run(
        "pp=3", "engine/admission=decision", "engine/ordering=blocking_lap", "engine.transport=sim"
    )
    print("\n1. time to the first wedge at pp=3 (wall: start of the run to its verdict)")
    print(f"{'preset':<24} {'sim (median [min, max])':>28} {'gloo':>28} {'gloo/sim':>9}")
    for preset in WEDGES:
        arms = {"sim": [], "gloo": []}
        for _ in range(args.reps):  # ABAB...
            for arm in arms:
                extra = ["engine.transport=sim"] if arm == "sim" else ["watch.stall_s=3"]
                dt, s = timed_run(
                    "pp=3", "engine/admission=decision", f"engine/ordering={preset}", *extra
                )
                assert s["verdict"] == "wedged", (arm, preset, s["verdict"], s["reason"])
                arms[arm].append(dt)
        ratio = statistics.median(arms["gloo"]) / statistics.median(arms["sim"])
        print(f"{preset:<24} {spread(arms['sim']):>28} {spread(arms['gloo']):>28} {ratio:>8.1f}x")

    print(
        f"\n2. schedules per second, decision_first at pp=3 ({args.schedules} schedules, "
        "explore.strategy=random, model=micro)"
    )
    from ppx.sim.explore import explore

    cfg = _common.compose(
        *EXPLORE,
        "engine.transport=sim",
        f"explore.schedules={args.schedules}",
        f"explore.batch={max(args.schedules // 4, 1)}",
    )
    ex = explore(cfg, tempfile.mkdtemp(prefix="ppx-explore-"), EXPLORE, echo=lambda *_: None)
    counts = ex.table["verdict"].value_counts().to_dict()
    print(
        f"   {len(ex.table)} schedules in {ex.wall_s:.1f} s = "
        f"{len(ex.table) / ex.wall_s:.1f} schedules/s; verdicts {counts}; "
        f"median steps {int(ex.table['steps'].median())}"
    )

    print("\n3. +exp=smoke at pp=3, wall time of the whole run (boot, 32 requests, oracle, store)")
    arms = {"sim": [], "gloo": []}
    for _ in range(args.reps):
        for arm in arms:
            extra = ["engine.transport=sim"] if arm == "sim" else []
            dt, s = timed_run("+exp=smoke", "pp=3", *extra)
            assert s["verdict"] == "served", (arm, s["reason"])
            arms[arm].append(dt)
    ratio = statistics.median(arms["gloo"]) / statistics.median(arms["sim"])
    print(
        f"   sim  {spread(arms['sim'])}\n   gloo {spread(arms['gloo'])}\n   gloo/sim {ratio:.2f}x"
    )


if __name__ == "__main__":
    main()
