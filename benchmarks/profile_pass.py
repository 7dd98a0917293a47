"""Where a pass's time goes, per rank, from a real run (ranks over gloo).

  python benchmarks/profile_pass.py [--pp 1 3] [--new 96] [--mode decode] [--set OVERRIDE ...]
  e.g. --pp 3 --set engine/admission=decision engine/ordering=decision_first

Boots the engine with PPX_PROFILE=1 (ppx/engine/passprof.py: the engine's own methods timed
part by part, exclusive time, wall and thread CPU) on the decode load of bench_engine.py and
prints, per rank, the mean microseconds per pass of each part and its share of the pass.
`desched` is wall - cpu outside the waits: time the rank was runnable but not running (the
OS scheduler's share when ranks outnumber cores). The wrappers cost ~1-2 us per wrapped call,
so the pass is slower under the profile than without it; compare the parts, not the total
with a benchmark.
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import _common
import _method

BATCH, PROMPT = 8, 16


def profile(pp: int, new: int, extra: list[str]) -> str:
    os.environ["PPX_PROFILE"] = "1"  # inherited by the spawned ranks
    try:
        s, run_dir = _common.run(*_common.decode_load(pp, BATCH, PROMPT, new), *extra)
    finally:
        del os.environ["PPX_PROFILE"]
    assert s["verdict"] == "served", s["reason"]
    return run_dir


def table(path: str, mode: str) -> None:
    data = json.load(open(path))
    parts, waits = data["parts"], set(data["waits"])
    passes = [p for p in data["passes"] if mode == "all" or p["mode"] == mode]
    rank = os.path.basename(path).split(".")[0]
    if not passes:
        print(f"{rank}: no {mode} passes")
        return
    n = len(passes)
    wall = {k: sum(p["wall"].get(k, 0) for p in passes) / n / 1e3 for k in parts}
    cpu = {k: sum(p["cpu"].get(k, 0) for p in passes) / n / 1e3 for k in parts}
    pass_wall = sum(p["pass_wall"] for p in passes) / n / 1e3
    pass_cpu = sum(p["pass_cpu"] for p in passes) / n / 1e3
    wall["other"] = pass_wall - sum(v for k, v in wall.items() if k != "other")
    cpu["other"] = pass_cpu - sum(v for k, v in cpu.items() if k != "other")
    desched = sum(wall[k] - cpu[k] for k in parts if k not in waits)
    print(f"\n{rank}: {n} {mode} passes, pass {pass_wall:.0f} us wall, {pass_cpu:.0f} us cpu")
    print(f"  {'part':<11} {'wall us':>9} {'cpu us':>9} {'share':>7}")
    for k in sorted(parts, key=lambda k: -wall[k]):
        print(f"  {k:<11} {wall[k]:>9.1f} {cpu[k]:>9.1f} {100 * wall[k] / pass_wall:>6.1f}%")
    print(
        f"  {'desched':<11} {desched:>9.1f} {'':>9} {100 * desched / pass_wall:>6.1f}%"
        "   (runnable, not running: outside the waits)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pp", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--new", type=int, default=96, help="new tokens per request")
    ap.add_argument("--mode", default="decode", choices=["decode", "prefill", "all"])
    ap.add_argument("--set", nargs="*", default=[], help="extra config overrides")
    args = ap.parse_args()
    _method.print_machine()
    for pp in args.pp:
        run_dir = profile(pp, args.new, args.set)
        print(
            f"\n=== pp={pp}: batch {BATCH}, prompt {PROMPT}, {args.new} new tokens "
            f"{' '.join(args.set)} ({run_dir})"
        )
        for path in sorted(glob.glob(os.path.join(run_dir, "ranks", "rank*.profile.json"))):
            table(path, args.mode)


if __name__ == "__main__":
    main()
