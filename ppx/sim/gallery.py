"""The incident gallery, exhaustively: every cell of experiments/incident_gallery.yaml as one
exhaustive exploration at a small bound, one row per cell.

    python -m ppx.sim.gallery [--requests 2] [--max-new 1] [--cap 20000] [--budget-s 60]
        [--match TEXT] [--arm red|green]

Each cell runs as the gallery composes it (its design switches, faults, flips), on the hash
model and the idle clock, with the load cut to the bound (`--requests`, `--max-new`), for at
most `--cap` runs and `--budget-s` seconds. The row: verdict (`verified`: every
interleaving served; `refuted`: the shortest trace of its first failure, in steps;
`unknown`: the cap or the budget came first, with the states and depth reached), states,
transitions, wall seconds, states/s, trace length, depth, and the failure of that trace (a
livelock found as a fair cycle reads `livelocked: fair cycle ...`, its trace the steps to
the cycle's entry). A red arm that is `verified` at
the bound needs a larger one to fail (the row says so; nothing is hidden).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ppx.config import ConfigError

# the gallery's base keys the explorer sets itself (it always runs the simulator, no logger)
SKIP = ("logger=", "engine.transport=", "workload.max_new=")


def cells(match: str | None, arm: str | None = None) -> list[tuple[str, str, list[str]]]:
    from ppx.study.catalog import load_study

    study = load_study("incident_gallery")
    base = [o for o in study.base if not o.startswith(SKIP)]
    out = []
    for cell, label in zip(study.cells, study.labels, strict=True):
        name = label.get("incident", "?")
        if (match and match not in name) or (arm and label.get("arm") != arm):
            continue
        keep = {k: v for k, v in cell.items() if k not in ("model", "workload.num_requests")}
        out.append((name, label.get("arm", "?"), [*base, *(f"{k}={v}" for k, v in keep.items())]))
    return out


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ppx.validation import validate

    conf = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "conf")
    with initialize_config_dir(config_dir=os.path.abspath(conf), version_base=None):
        cfg = hydra_compose(config_name="explorer", overrides=["engine.transport=sim", *overrides])
    return validate(cfg)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ppx.sim.gallery")
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--max-new", type=int, default=1)
    ap.add_argument("--cap", type=int, default=20000)
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--match", default=None)
    ap.add_argument("--arm", choices=("red", "green"), default=None)
    args = ap.parse_args(argv)
    from ppx.sim.exhaustive_run import search

    bound = [f"workload.num_requests={args.requests}", f"workload.max_new={args.max_new}",
             "explore.clock=idle", "explore.strategy=exhaustive", "explore.shrink=0",
             f"explore.schedules={args.cap}", f"explore.budget_s={args.budget_s}"]  # fmt: skip
    print(f"{'cell':<40} {'arm':<6} {'verdict':<9} {'states':>7} {'trans':>7} {'wall_s':>7} "
          f"{'states/s':>9} {'trace':>6} {'depth':>5}  failure")  # fmt: skip
    for name, arm, ov in cells(args.match, args.arm):
        try:
            cfg = compose([*ov, *bound])
        except ConfigError as e:
            print(f"{name[:39]:<40} {arm:<6} config error: {e}", flush=True)
            continue
        t = time.perf_counter()
        ex = search(cfg, echo=lambda *_: None)
        d, wall = ex.dfs, time.perf_counter() - t
        traces = d.get("traces") or {}
        # the failure the trace column measures: the shortest (a fair cycle before the
        # pass-count bound's livelock of the same run)
        fail = min(traces, key=lambda k: traces[k]["trace_len"], default="")
        print(f"{name[:39]:<40} {arm:<6} {d['verdict']:<9} {d['states']:>7} "
              f"{d['transitions']:>7} {wall:>7.1f} {d['states'] / wall:>9.1f} "
              f"{d['trace_len'] if d['trace_len'] is not None else '-':>6} {d['depth']:>5}  {fail[:60]}",
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
