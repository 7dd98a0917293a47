"""The explorer, measured (printed, never asserted), side by side in one run:

1. schedules per second of `python -m ppx.explore pp=3` (the explorer's engine: four
   requests, pp=3), model=hash against model=micro, interleaved rounds on one worker
   (benchmarks/_method.py); then the issue's command itself, with two workers
2. the bug zoo: every red cell of experiments/incident_gallery.yaml a schedule can end in
   (and a corrupt token), schedules and wall seconds to the first schedule with its red
   verdict, per strategy
3. dfs on decision_first at pp=3: the whole step-bounded tree, plain and with the sleep-set
   reduction (explore.clock=idle), schedules run and pruned, exhausted or not
4. (--gloo) the simulator beside gloo: time to the first wedge, and +exp=smoke

  python benchmarks/bench_explore.py [--rounds 6] [--schedules 100] [--cap 100]
                                     [--dfs-bound 16] [--gloo]
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

STRATEGIES = {  # the zoo's columns
    "random": ["explore.strategy=random"],
    "pct": ["explore.strategy=pct", "explore.pct.depth=3"],
    "dfs": ["explore.strategy=dfs", "explore.dfs.delays=2", "explore.reduce=none"],
    "portfolio": ["explore.strategy=portfolio", "explore.portfolio=[random,pct]"],
}
WEDGES = ["flush_before_decision", "blocking_lap", "decision_after_launch"]


def rate(model: str, n: int) -> float:
    """Schedules per second of one in-process exploration (one worker)."""
    from ppx.sim.explore import explore

    cfg = _zoo.explorer_compose("pp=3", f"model={model}", f"explore.schedules={n}")
    ex = explore(cfg, tempfile.mkdtemp(prefix="ppx-explore-"), [], echo=lambda *_: None)
    assert set(ex.table["verdict"]) == {"served"}, ex.table["verdict"].value_counts()
    return len(ex.table) / ex.wall_s


def speed(args) -> None:
    print(f"\n1. schedules/s, python -m ppx.explore pp=3 ({args.schedules} per arm and round)")
    got = _method.interleave(
        {m: (lambda m=m: rate(m, args.schedules)) for m in ("micro", "hash")}, args.rounds
    )
    _method.report(got, "micro", "schedules/s (one worker)", target=10.0)
    out = tempfile.mkdtemp(prefix="ppx-explore-")
    cmd = ["python", "-m", "ppx.explore", "pp=3", "model=hash", "explore.schedules=1000",
           "explore.fanout.workers=2", f"hydra.run.dir={out}"]  # fmt: skip
    subprocess.run([sys.executable, *cmd[1:]], cwd=_common.ROOT, check=True, capture_output=True)
    s = json.load(open(os.path.join(out, "summary.json")))
    print(f"\n   {' '.join(cmd[:-1])}\n   -> {s['schedules']} schedules in {s['wall_s']} s = "
          f"{s['schedules_per_s']} schedules/s; verdicts {s['verdicts']}; "
          f"{s['tokens_checked']} tokens checked")  # fmt: skip


def zoo(args) -> None:
    print(f"\n2. the bug zoo: schedules (wall s) to the first red verdict, model=hash, "
          f"up to {args.cap} schedules; '-' = not within them")  # fmt: skip
    print(f"{'cell':<38} {'red':<18}" + "".join(f"{s:>17}" for s in STRATEGIES))
    found = dict.fromkeys(STRATEGIES, 0)
    cells = _zoo.red_cells()
    for incident, ov, want in cells:
        row = f"{incident[:37]:<38} {'|'.join(sorted(want)):<18}"
        for name, extra in STRATEGIES.items():
            cfg = _common.compose(*ov, "model=hash", *extra, "explore.shrinker.runs=0")
            hit = _zoo.first_find(cfg, want, args.cap)
            found[name] += hit is not None
            row += f"{'-' if hit is None else f'{hit[0]} ({hit[1]:.2f})':>17}"
        print(row, flush=True)
    print(f"{'found':<57}" + "".join(f"{f'{v}/{len(cells)}':>17}" for v in found.values()))


def dfs(args) -> None:
    from ppx.sim.explore import explore

    print(f"\n3. dfs, decision_first pp=3 (the explorer's load), the first {args.dfs_bound} "
          "steps, explore.clock=idle")  # fmt: skip
    ends = {}
    for reduce in ("none", "sleep"):
        ov = ["pp=3", "engine/admission=decision", "engine/ordering=decision_first",
              "explore.strategy=dfs", f"explore.dfs.bound={args.dfs_bound}", "explore.clock=idle",
              f"explore.reduce={reduce}", "explore.schedules=1000000", "explore.shrinker.runs=0"]  # fmt: skip
        t = time.perf_counter()
        ex = explore(_zoo.explorer_compose(*ov), tempfile.mkdtemp(), [], echo=lambda *_: None)
        d, df = ex.dfs, ex.table
        ends[reduce] = set(zip(df.verdict, df.cycle.fillna(""), df.steps, df.virtual_s, df.tokens))
        print(f"   reduce={reduce:<5} {d['runs']:>6} schedules run, {d['blocked']:>5} cut runs + "
              f"{d['skipped']:>5} sleeping choices pruned, exhausted={d['exhausted']}, "
              f"{time.perf_counter() - t:6.1f} s, {len(ends[reduce])} distinct ends")  # fmt: skip
    print(
        f"   every end of the plain tree reached with the reduction: {ends['none'] <= ends['sleep']}"
    )


def gloo(args) -> None:
    def timed(*overrides: str) -> tuple[float, dict]:
        t = time.perf_counter()
        s, _ = _common.run(*overrides)
        return time.perf_counter() - t, s

    def spread(xs: list[float]) -> str:
        return f"{statistics.median(xs):8.2f} s  [{min(xs):.2f}, {max(xs):.2f}]"

    base = ["pp=3", "engine/admission=decision"]
    timed(*base, "engine/ordering=blocking_lap", "engine.transport=sim")  # imports, untimed
    print("\n4. time to the first wedge at pp=3, sim vs gloo (median [min, max])")
    for preset in WEDGES:
        arms = {"sim": [], "gloo": []}
        for _ in range(args.reps):
            for arm in arms:
                extra = ["engine.transport=sim"] if arm == "sim" else ["watch.stall_s=3"]
                dt, s = timed(*base, f"engine/ordering={preset}", *extra)
                assert s["verdict"] == "wedged", (arm, preset, s["verdict"], s["reason"])
                arms[arm].append(dt)
        r = statistics.median(arms["gloo"]) / statistics.median(arms["sim"])
        print(f"   {preset:<24} sim {spread(arms['sim'])}  gloo {spread(arms['gloo'])}  {r:.1f}x")
    arms = {"sim": [], "gloo": []}
    for _ in range(args.reps):
        for arm in arms:
            dt, s = timed("+exp=smoke", "pp=3", *(["engine.transport=sim"] if arm == "sim" else []))
            assert s["verdict"] == "served", (arm, s["reason"])
            arms[arm].append(dt)
    print(f"   +exp=smoke pp=3: sim {spread(arms['sim'])}  gloo {spread(arms['gloo'])}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--schedules", type=int, default=100)
    ap.add_argument("--cap", type=int, default=100)
    ap.add_argument("--dfs-bound", type=int, default=16)
    ap.add_argument("--gloo", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    _method.pin_threads()
    _method.print_machine()
    speed(args)
    zoo(args)
    dfs(args)
    if args.gloo:
        gloo(args)
    _method.print_machine()


if __name__ == "__main__":
    main()
