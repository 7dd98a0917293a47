"""Time to the post-mortem page: `python -m ppx.postmortem RUN_DIR` as a user runs it (a
fresh interpreter), and that plus rendering it in headless Chromium, per run dir of a
gallery wedge (sim and gloo); the two arms interleaved.

  python benchmarks/bench_postmortem_page.py [--reps 6]
  (target: <= 10 s per run dir for the page and its rendering; printed, never asserted)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import _common
import _method

sys.path.insert(0, os.path.join(_common.ROOT, "tests"))
from browser import rendered_dom  # noqa: E402

WEDGE = ["pp=3", "engine/admission=decision", "engine/ordering=flush_before_decision"]


def page(run_dir: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ppx.postmortem", run_dir], check=True, capture_output=True)  # fmt: skip
    return time.perf_counter() - t0


def page_and_render(run_dir: str) -> float:
    t0 = time.perf_counter()
    page(run_dir)
    assert "cycle-rank" in rendered_dom(os.path.join(run_dir, "postmortem.html"))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=6)
    args = ap.parse_args()
    _method.print_machine()
    dirs = {}
    for transport in ("sim", "gloo"):
        s, d = _common.run(*WEDGE, f"engine.transport={transport}", "watch.stall_s=3")
        assert s["verdict"] == "wedged", s["reason"]
        dirs[transport] = d
    arms = {f"{t} {name}": (lambda fn=fn, d=d: fn(d)) for t, d in dirs.items()
            for name, fn in (("page", page), ("page+chromium", page_and_render))}  # fmt: skip
    got = _method.interleave(arms, args.reps)
    print(f"\nseconds per run dir, {args.reps} interleaved rounds (target <= 10 s)")
    for name, xs in got.items():
        med, lo, hi, cov = _method.median_ci(xs)
        ci = f"{100 * cov:.1f} % interval [{lo:.2f}, {hi:.2f}]" if cov else "no 95 % interval"
        print(f"  {name:>20}: median {med:.2f} s, {ci}; {'met' if med <= 10 else 'NOT met'}")
    print(_method.machine())


if __name__ == "__main__":
    main()
