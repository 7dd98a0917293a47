"""The random strategy's speed, this tree against a base commit (printed, never asserted):

1. one worker: `--schedules` random schedules of `python -m ppx.explore pp=3 model=hash`'s
   config in one process (the Runner built once, as a worker does), per arm: CPU ms per
   schedule (`time.process_time`) and schedules per wall second
2. the issue's command, `python -m ppx.explore pp=3 model=hash explore.schedules=1000
   explore.fanout.workers=2`, per arm: schedules/s from its summary.json
3. (--exhaustive) the exhaustive search of decision + decision_first at pp=3, 3 requests,
   max_new 2 (bench_exhaustive.py's scenario), per arm: states, transitions (equal in both
   arms, or the speed work changed behaviour) and distinct states per CPU second

Each arm runs in its own process with PYTHONPATH and the working directory at its tree: the
base is a detached worktree of `--base` made in a temporary directory (removed after).
Rounds are interleaved, the arm order reversed every other round, one untimed warm-up
(benchmarks/_method.py); per part the median of the per-round ratios and its interval.

  python benchmarks/bench_schedules.py [--base REF] [--rounds 6] [--schedules 300]
                                       [--skip-fanout] [--exhaustive]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import _common
import _method

ONE_WORKER = """
import json, sys, time, torch
from hydra import compose, initialize_config_dir
from ppx.validation import validate
from ppx.sim.runner import Runner
from ppx.sim.strategy import RandomStrategy
torch.set_num_threads(1)
with initialize_config_dir(config_dir=sys.argv[1], version_base=None):
    cfg = validate(compose(config_name="explorer",
                           overrides=["engine.transport=sim", "pp=3", "model=hash"]))
runner = Runner(cfg)
runner.run(RandomStrategy(-1))  # first-call costs outside the figure
n = int(sys.argv[2])
wall, cpu = time.perf_counter(), time.process_time()
for seed in range(n):
    runner.run(RandomStrategy(seed))
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"per_s": n / wall, "cpu_ms": 1e3 * cpu / n}))
"""

EXHAUSTIVE = """
import json, sys, tempfile, time, torch
from hydra import compose, initialize_config_dir
from ppx.validation import validate
from ppx.sim.explore import explore
torch.set_num_threads(1)
ov = ["engine.transport=sim", "pp=3", "engine/admission=decision",
      "engine/ordering=decision_first", "workload.num_requests=3", "workload.max_new=2",
      "explore.clock=idle", "explore.strategy=exhaustive", "explore.shrinker.runs=0",
      "explore.schedules=1000000"]
with initialize_config_dir(config_dir=sys.argv[1], version_base=None):
    cfg = validate(compose(config_name="explorer", overrides=ov))
cpu = time.process_time()
ex = explore(cfg, tempfile.mkdtemp(prefix="ppx-exh-"), [], echo=lambda *_: None)
cpu = time.process_time() - cpu
d = ex.dfs
print(json.dumps({"verdict": d["verdict"], "states": d["states"],
                  "transitions": d["transitions"], "per_cpu_s": d["states"] / cpu}))
"""


def child(tree: str, code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-c", code, os.path.join(tree, "conf"), *args],
                         cwd=tree, env=env, check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def fanout(tree: str) -> float:
    out = tempfile.mkdtemp(prefix="ppx-explore-")
    cmd = [sys.executable, "-m", "ppx.explore", "pp=3", "model=hash", "explore.schedules=1000",
           "explore.fanout.workers=2", f"hydra.run.dir={out}"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=tree)
    subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True)
    s = json.load(open(os.path.join(out, "summary.json")))
    assert s["verdicts"] == {"served": 1000}, s["verdicts"]
    return float(s["schedules_per_s"])


def part(title: str, arms: dict, fn, rounds: int, unit: str) -> None:
    print(f"\n{title}")
    got = _method.interleave({name: (lambda t=tree: fn(t)) for name, tree in arms.items()}, rounds)
    _method.report(got, "base", unit, target=1.0, exclude=1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="main")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--schedules", type=int, default=300)
    ap.add_argument("--skip-fanout", action="store_true")
    ap.add_argument("--exhaustive", action="store_true")
    args = ap.parse_args()
    root = _common.ROOT
    base = os.path.join(tempfile.mkdtemp(prefix="ppx-base-"), "tree")
    subprocess.run(["git", "-C", root, "worktree", "add", "--detach", base, args.base],
                   check=True, capture_output=True)  # fmt: skip
    head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    arms = {"base": base, "this": root}
    print(f"base = {args.base}; this = {root} (HEAD {head}, with its uncommitted changes)")
    _method.print_machine()
    try:
        runs: dict[str, list[dict]] = {"base": [], "this": []}

        def one(tree: str, key: str) -> float:
            d = child(tree, ONE_WORKER, str(args.schedules))
            runs["this" if tree == root else "base"].append(d)
            return d[key]

        part(f"1. one worker, {args.schedules} random schedules per arm and round: schedules/s",
             arms, lambda t: one(t, "per_s"), args.rounds, "schedules/s (one worker)")  # fmt: skip
        for name, ds in runs.items():
            cpu = [d["cpu_ms"] for d in ds[1:]]  # the warm-up round's left out
            med, lo, hi, _ = _method.median_ci(cpu)
            print(f"   {name}: CPU ms per schedule median {med:.2f} [{lo:.2f}, {hi:.2f}]")
        if not args.skip_fanout:
            part("2. python -m ppx.explore pp=3 model=hash explore.schedules=1000 "
                 "explore.fanout.workers=2: schedules/s", arms, fanout, args.rounds,
                 "schedules/s (two workers)")  # fmt: skip
        if args.exhaustive:
            seen: dict[str, set] = {"base": set(), "this": set()}

            def exhaustive(tree: str) -> float:
                d = child(tree, EXHAUSTIVE)
                seen["this" if tree == root else "base"].add(
                    (d["verdict"], d["states"], d["transitions"])
                )
                return d["per_cpu_s"]

            part("3. exhaustive, decision + decision_first pp=3, 3 requests, max_new 2: "
                 "distinct states per CPU s", arms, exhaustive, args.rounds,
                 "states per CPU s")  # fmt: skip
            print(f"   (verdict, states, transitions): {seen}")
    finally:
        subprocess.run(["git", "-C", root, "worktree", "remove", "--force", base],
                       capture_output=True)  # fmt: skip
    _method.print_machine()


if __name__ == "__main__":
    main()
