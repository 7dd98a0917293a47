"""The incident gallery, exhaustively: every cell of experiments/incident_gallery.yaml as
exhaustive explorations up a ladder of bounds, one row per cell.

    python -m ppx.sim.gallery [--budget-s 30] [--cap 20000] [--match TEXT] [--arm red|green]
        [--requests 2] [--max-new 1] [--fixed] [--property expectation|verdict]
        [--clock auto|idle|step]

Each cell runs as the gallery composes it (its design switches, faults, flips), on the hash
model and the idle clock, or the step clock for a cell with a host tier (`walk_clock`; the
cell's own `model` and the gallery's clock are cut), with the
load cut to each rung's bound: from `--requests`, `--max-new` up to the cell's own
`workload.num_requests` and `workload.max_new` as the study composes them (gallery_ladder.py
says how a red and a green climb). `--budget-s` is wall seconds per cell, all rungs
together; `--cap` runs per walk. `--fixed`: the one bound `--requests`, `--max-new` only.

Each end is checked against the cell's own expectation in the study (gallery_expect.py):
a red looks for an end that meets its red expectation (a counter, an event sequence, a
named stop), a green for an end that fails its green one. `--property verdict`: any end
not served (what the gallery checked before). At the cell's own load a red's probe also
runs the cell's own schedule (the study's strategy and `explore.seed`).

The row: verdict (`refuted`: some rung's walk, or its probe, found such an end; `verified`:
no interleaving at any rung up to the cell's own load did; `unknown`: the budget
came first), the bound it names (the refuting rung, else the largest verified), the rung
where the budget ran out, the ladder's top (the cell's own load, or the fixed bound), then the counts of the deciding walk
(states, transitions, wall, states/s, trace length, whether it was exhausted: an exhausted
red's trace is the shortest of all, by breadth-first search over the whole graph), the
ladder's wall, the walks' clock and every rung's answers (a red's probe first, then
the walk: `V` verified, `R` refuted, `?` unknown; `-` no time left to walk it; `s`/`f`: the
probe found no such end / one), and the failure of the trace.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field, replace

from ppx.config import ConfigError
from ppx.replay import CONF_DIR
from ppx.sim.gallery_expect import EndProperty, cell_expectations
from ppx.sim.gallery_ladder import Climb, Rung, Walk, climb, rungs
from ppx.sim.timing import polls_the_clock

# the gallery's base keys the explorer sets itself (it always runs the simulator, no logger)
SKIP = ("logger=", "engine.transport=", "workload.max_new=")
ROOT = os.path.dirname(CONF_DIR)  # a workload's relative path is the repository's
# what conf/explorer.yaml sets besides the load (a short shared prefix, 4 at a time, a small
# pool): the top rung restores the study's values
RESTORED = (
    "workload.prefix_len",
    "workload.concurrency",
    "engine.max_reqs",
    "engine.kv.pool_tokens",
)


@dataclass
class Cell:
    name: str
    arm: str
    overrides: list[str]  # the explorer's: the gallery's base and the cell, its load cut
    study: list[str]  # the study's own overrides of the cell (its load as it runs)
    expect: list[dict] = field(default_factory=list)  # its per-run expectations (the study's)

    def own(self) -> Rung:
        """The cell's load as the study composes it (conf/config.yaml, the gallery's base):
        its requests (a file's workload, jsonl, serves at most its lines) and max_new, and
        where the explorer's config (conf/explorer.yaml) sets them otherwise, the study's
        prefix length, concurrency, request rows and KV pool."""
        from omegaconf import OmegaConf

        study, ours = _compose("config", self.study), compose(self.overrides)
        w = study.workload
        requests = int(w.num_requests)
        path = w.get("path") and os.path.join(ROOT, str(w.path))
        if path and os.path.exists(path):
            with open(path) as f:
                requests = min(requests, sum(1 for ln in f if ln.strip()))
        extra = []
        for key in RESTORED:
            theirs = OmegaConf.select(study, key)
            if theirs is not None and theirs != OmegaConf.select(ours, key):
                extra.append((key, str(theirs)))
        return Rung(requests, int(w.max_new), tuple(extra))


def cells(match: str | None, arm: str | None = None) -> list[tuple[str, str, list[str]]]:
    """(incident, arm, the explorer's overrides) of each cell matching `match` and `arm`."""
    return [(c.name, c.arm, c.overrides) for c in gallery_cells(match, arm)]


def gallery_cells(match: str | None, arm: str | None = None) -> list[Cell]:
    from ppx.study.catalog import load_study

    study = load_study("incident_gallery")
    base = [o for o in study.base if not o.startswith(SKIP)]
    out = []
    for i, (cell, label) in enumerate(zip(study.cells, study.labels, strict=True)):
        name = label.get("incident", "?")
        if (match and match not in name) or (arm and label.get("arm") != arm):
            continue
        keep = {k: v for k, v in cell.items() if k not in ("model", "workload.num_requests")}
        out.append(Cell(name, label.get("arm", "?"),
                        [*base, *(f"{k}={v}" for k, v in keep.items())],
                        [*study.base, *(f"{k}={v}" for k, v in cell.items())],
                        cell_expectations(study, i)))  # fmt: skip
    return out


def _compose(config_name: str, overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ppx.validation import validate

    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = hydra_compose(config_name=config_name, overrides=["engine.transport=sim", *overrides])
    return validate(cfg)


def compose(overrides: list[str]):
    return _compose("explorer", overrides)


CLOCKS = ("auto", "idle", "step")  # --clock: `auto` is walk_clock's choice per cell


def walk_clock(cfg) -> str:
    """The clock a cell's walk runs on (`--clock auto`). The idle clock keeps the state graph
    small and loses no behaviour where every effect on the clock is waited on: a sleep's or
    a timeout's deadline is a wake-up it jumps to. A cell whose runs poll the clock
    (timing.polls_the_clock: a host tier's load-back) walks on the step clock instead, where
    every step costs sim.step_us and a load lands after finitely many polls, as on a real
    clock; on the idle clock the race it is part of is never reached (#1175: rank 0's 2 ms
    load landed while rank 1's 300 ms one has not)."""
    return "step" if polls_the_clock(cfg) else "idle"


def walker(
    cell: Cell, cap: int, own: Rung | None = None, expectation: bool = True, clock: str = "auto"
):
    """The ladder's `walk(rung, budget, probe)` for one cell: an exhaustive exploration at
    the rung's bound (a probe: its first schedule alone, no cache), looking for an end that
    meets a red's expectation or fails a green's (gallery_expect.py; the checks that count
    the load only at `own`, the cell's own load). `expectation=False`: for an end that is
    not served (the property before the expectations were checked). `clock`: the walk's
    clock, `auto` for walk_clock's choice."""
    from ppx.sim.exhaustive_run import search

    if clock == "auto":
        clock = walk_clock(compose(cell.overrides))

    def walk(rung: Rung, budget_s: float, probe: bool) -> Walk:
        x = [f"explore.clock={clock}", "explore.strategy=exhaustive", "explore.shrinker.runs=0",
             f"explore.schedules={1 if probe else cap}", f"explore.budget_s={budget_s}"]  # fmt: skip
        if probe:
            x.append("explore.exhaustive.cache=false")
        cfg = compose([*cell.overrides, *rung.overrides(), *x])
        t = time.perf_counter()
        prop = EndProperty.of(cell.expect, cell.arm, rung == own) if expectation else None
        d = search(cfg, echo=lambda *_: None, end_check=prop).dfs
        if probe and rung == own and d["verdict"] != "refuted":
            # at the cell's own load the probe also runs the cell's own schedule: the
            # study's run (its strategy and `explore.seed`) on the walk's model and clock
            theirs = study_schedule(cfg, prop)
            if theirs is not None:
                return replace(theirs, rung=rung, wall_s=time.perf_counter() - t)
        traces = d.get("traces") or {}
        # the failure the trace column measures: the shortest (a fair cycle before the
        # pass-count bound's livelock of the same run)
        fail = min(traces, key=lambda k: traces[k]["trace_len"], default="")
        return Walk(rung, d["verdict"], bool(d["exhausted"]), d["states"], d["transitions"],
                    time.perf_counter() - t, d["trace_len"], fail, probe)  # fmt: skip

    return walk


def study_schedule(cfg, prop: EndProperty | None) -> Walk | None:
    """The cell's own schedule as a probe when it fails (None when it does not): one run of
    the strategy the study runs a cell with (the config's one-run strategy, `explore.seed`).
    Its trace is the run's steps (the ladder's walks look for a shorter one)."""
    from ppx.sim.exhaustive_run import fails
    from ppx.sim.registry import one_run_strategy
    from ppx.sim.runner import Runner
    from ppx.sim.timing import sim_tasks

    res = Runner(cfg, None, prop).run(one_run_strategy(cfg.explore, sim_tasks(cfg)))
    key = None if res is None else fails(res.row)
    if key is None:
        return None
    return Walk(Rung(0, 0), "refuted", False, None, None, 0.0, res.row["steps"], key, True)


HEAD = (f"{'cell':<40} {'arm':<6} {'verdict':<9} {'bound':>6} {'out_at':>6} {'top':>6} "
        f"{'states':>7} {'trans':>7} {'wall_s':>7} {'states/s':>9} {'trace':>6} {'exh':>3} "
        f"{'total_s':>7} {'clock':>5}  ladder | failure")  # fmt: skip


def row(name: str, c: Climb, clock: str) -> str:
    d = c.deciding
    bound = c.refuted or c.verified
    out_at = c.stopped if c.refuted is None else None

    def num(v) -> str:
        return "-" if v is None else str(v)

    rate = f"{d.states / d.wall_s:.1f}" if d and d.states and d.wall_s else "-"
    return (f"{name[:39]:<40} {c.arm:<6} {c.verdict:<9} {num(bound and bound.rung):>6} "
            f"{num(out_at):>6} {c.own!s:>6} {num(d and d.states):>7} "
            f"{num(d and d.transitions):>7} {d.wall_s if d else 0:>7.1f} {rate:>9} "
            f"{num(d and d.trace_len):>6} {('yes' if d and d.exhausted else 'no'):>3} "
            f"{c.wall_s:>7.1f} {clock:>5}  {c.ladder} | {(d.failure if d else '')[:60]}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ppx.sim.gallery")
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--max-new", type=int, default=1)
    ap.add_argument("--fixed", action="store_true", help="the one bound, no ladder")
    ap.add_argument("--cap", type=int, default=20000)
    ap.add_argument("--budget-s", type=float, default=30.0)
    ap.add_argument("--match", default=None)
    ap.add_argument("--arm", choices=("red", "green"), default=None)
    ap.add_argument("--property", choices=("expectation", "verdict"), default="expectation",
                    help="what an end is checked against: the cell's expectation (a red "
                    "refuted by an end meeting it, a green by one failing it), or `verdict`: "
                    "any end not served")  # fmt: skip
    ap.add_argument("--clock", choices=CLOCKS, default="auto",
                    help="the walks' clock: `auto` is idle, or step for a cell whose runs poll a host "
                    "load (walk_clock)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.requests < 1 or args.max_new < 1 or args.budget_s <= 0 or args.cap < 1:
        print("ppx.sim.gallery: --requests, --max-new, --cap and --budget-s must be positive",
              file=sys.stderr)  # fmt: skip
        return 2
    print(HEAD)
    start = Rung(args.requests, args.max_new)
    for cell in gallery_cells(args.match, args.arm):
        try:
            own = cell.own()
            ladder = [start] if args.fixed else rungs(own, start)
            cfg = compose([*cell.overrides, *start.overrides()])
        except ConfigError as e:
            print(f"{cell.name[:39]:<40} {cell.arm:<6} config error: {e}", flush=True)
            continue
        clock = walk_clock(cfg) if args.clock == "auto" else args.clock
        walk = walker(cell, args.cap, own, args.property == "expectation", clock)
        got = climb(cell.arm, ladder, args.budget_s, walk)
        print(row(cell.name, got, clock), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
