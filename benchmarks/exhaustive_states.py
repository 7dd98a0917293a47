"""Sleep sets cut transitions, not states: the reduced (`explore.reduce=sleep`) and the plain
(`none`) cached exhaustive walk of each config below, printed side by side -- distinct
states, transitions, runs, and whether the two walks visited the same set of state digests
(both in this process, each on a Runner of its own; docs/simulation.md, "Sleep sets reach
every state"). Printed, never asserted.

  python benchmarks/exhaustive_states.py [--match TEXT]
"""

from __future__ import annotations

import argparse
import time

import _common  # noqa: F401 - puts the repository on sys.path

EXHAUSTIVE = ["explore.clock=idle", "explore.strategy=exhaustive", "explore.shrinker.runs=0"]
DECISION = ["engine/admission=decision", "engine/ordering=decision_first"]
ISSUE = ["pp=3", *DECISION, "workload.num_requests=3", "workload.max_new=2"]
CONFIGS = {
    "decision + decision_first, pp=3 (3, 2)": ISSUE,
    "the same, one flip": [*ISSUE, "flip=every_40_passes", "flip.every_passes=2",
                           "flip.max_flips=1"],
    "pp=3 decision_first, offer_flap (2, 1)": ["pp=3", *DECISION, "workload.num_requests=2",
                                               "workload.max_new=1", "faults=offer_flap"],
    "pp=2 decision_first, host_prefetch, timing=choice (2, 1)": [
        "pp=2", *DECISION, "workload.num_requests=2", "workload.max_new=1",
        "faults=host_prefetch", "faults.timing=choice"],
}  # fmt: skip


def gallery_cell(name: str, arm: str) -> list[str]:
    from ppx.sim.gallery import cells

    [(_, _, overrides)] = [c for c in cells(name, arm) if c[0] == name]
    return [*overrides, "workload.num_requests=2", "workload.max_new=1"]


def walk(cfg, sleep: bool):
    from ppx.sim.exhaustive import ExhaustiveWalker, walk_to_the_end
    from ppx.sim.fingerprint import Fingerprint
    from ppx.sim.runner import Runner

    t = time.perf_counter()
    runner = Runner(cfg)
    w = walk_to_the_end(runner, ExhaustiveWalker(sleep, True, Fingerprint(runner.inputs)))
    return w, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--match", default=None)
    args = ap.parse_args()
    from ppx.sim.gallery import compose

    configs = {"#630 told sequence green (2, 1)": gallery_cell("#630 told sequence", "green"),
               **CONFIGS}  # fmt: skip
    for name, overrides in configs.items():
        if args.match and args.match not in name:
            continue
        cfg = compose([*overrides, *EXHAUSTIVE])
        (red, t_red), (plain, t_plain) = walk(cfg, True), walk(cfg, False)
        print(f"{name}: states {red.stats.states} / {plain.stats.states}, transitions "
              f"{red.stats.transitions} / {plain.stats.transitions}, runs "
              f"{red.runs + red.blocked} / {plain.runs + plain.blocked}, wall {t_red:.1f} / "
              f"{t_plain:.1f} s (reduced / plain); same digests: "
              f"{set(red.visited) == set(plain.visited)}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
