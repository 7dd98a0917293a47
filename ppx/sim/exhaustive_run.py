"""An exhaustive exploration end to end: the walk run to exhaustion, its verdict, the
shortest trace of each failure (replayed to check it), and the counts behind them.

Verdict: `refuted` when some schedule fails (each failure key saved with its shortest
trace, replayable as every failure is), `verified` when the walk was exhausted and every
schedule served, `unknown` when `explore.schedules` runs ended the walk first (the bound it
reached is in the counts: runs, states, depth); so does `explore.budget_s` of wall time,
looked at before every new state (a run is cut there, and the walk ends) and before every
fair cycle is pumped (a cycle left unpumped is in the counts, `confirmed: None`, and a walk
that would be verified is `unknown`: an unchecked cycle may be a livelock).

Liveness (`explore.exhaustive.liveness`, on by default with the cache): after the walk, the fair
cycles of the abstract state graph (liveness.py), each pumped to confirm it; a confirmed
one is a failure `livelocked: fair cycle ...` whose trace is the shortest one to the
cycle's entry, whose schedule is the pumped run (it replays), and whose lap's states go to
`livelock` in the counts and to livelock.json beside summary.json.
"""

from __future__ import annotations

import time

from ppx.sim.exhaustive import ExhaustiveWalker, choice_points
from ppx.sim.fingerprint import Fingerprint
from ppx.sim.liveness import pump
from ppx.sim.liveness_forms import Abstraction
from ppx.sim.liveness_graph import fair_cycles
from ppx.sim.liveness_report import describe
from ppx.sim.merge import Exploration
from ppx.sim.registry import reduction_of
from ppx.sim.runner import Runner, failure_key
from ppx.sim.shard import Failure
from ppx.sim.strategy import ReplayStrategy

# summary.json keys of an exhaustive exploration (besides every exploration's)
KEYS = ("verdict", "states", "transitions", "states_per_s", "wall_s", "trace_len")


def fails(row: dict) -> str | None:
    """The failure key of an end the search looks for: the end property's where the runner
    has one (`property_key`, gallery_expect.py), else any end not served."""
    if "property_key" in row:
        return row["property_key"] or None
    return row["reason_key"] if row["verdict"] != "served" else None


def search(cfg, echo=print, log=None, end_check=None) -> Exploration:
    """The walk to exhaustion (the module docstring); `end_check`: the property each end is
    checked against (gallery_expect.EndProperty; None: a failing end is one not served)."""
    x = cfg.explore
    t0 = time.perf_counter()
    runner = Runner(cfg, log, end_check)
    cache, liveness = bool(x.exhaustive.cache), bool(x.exhaustive.liveness)
    # the exploration's immutable inputs stand in the fingerprint by identity; without the
    # cache no state is fingerprinted (no visited set, no graph: the plain tree of runs)
    inputs = runner.inputs
    fp = Fingerprint(inputs) if cache else None
    # the abstract graph needs the concrete one (the cache's graph): liveness rides on it
    abstraction = Abstraction(inputs) if cache and liveness else None
    walker = ExhaustiveWalker(reduction_of(x).sleep, cache, fp, abstraction)
    rows: list[dict] = []
    found: dict[str, tuple[int, list]] = {}  # failure key -> (first row, its choices)
    runs: dict[int, list] = {}  # failing row -> its choices
    cap, batch, budget = int(x.schedules), int(x.fanout.batch), float(x.budget_s)
    # past the budget, the walk ends `unknown`, with the bound reached (states, depth)
    walker.deadline = t0 + budget if budget else None
    while not walker.exhausted and len(rows) < cap and not walker.out_of_time:
        res = runner.run(walker.strategy())
        if res is None:
            walker.record_end(None)
            continue
        rows.append({"schedule": len(rows), "strategy": "exhaustive", **res.row})
        walker.record_end(len(rows) - 1)
        key = fails(res.row)
        if key is not None and fp is None:
            runs[len(rows) - 1] = res.choices
        if key is not None and key not in found:
            found[key] = (len(rows) - 1, res.choices)
            echo(f"ppx.explore: schedule {len(rows) - 1} fails: {key}")
        if len(rows) % (batch * 40) == 0:
            st = walker.stats
            echo(f"ppx.explore: exhaustive: {len(rows)} schedules, {st.states} states, "
                 f"{st.transitions} transitions, {time.perf_counter() - t0:.1f} s")  # fmt: skip
    ex = Exploration(rows=rows, wall_s=time.perf_counter() - t0)
    traces = {}
    for key, (index, original) in found.items():
        steps = walker.shortest(rows, lambda r, key=key: fails(r) == key)
        if steps is not None:  # breadth-first over the state graph
            choices, trace_len = choice_points(steps), len(steps)
        else:  # no graph (no cache): the shortest run of the plain tree
            index = min((r["steps"], r["schedule"]) for r in rows if fails(r) == key)[1]
            choices, trace_len = runs[index], rows[index]["steps"]
        again = runner.run(ReplayStrategy(choices))
        row = rows[index]
        ex.failures[key] = Failure(
            key, index, "exhaustive", -1, row["verdict"], row["reason"], original, choices, {}
        )
        traces[key] = {
            "trace_len": trace_len,
            "choice_points": len(choices),
            "replayed": again is not None and fails(again.row) == key,
        }
    cycles = livelocks(runner, walker, ex, traces, echo) if abstraction is not None else []
    ex.wall_s = time.perf_counter() - t0
    cycle_fails = end_check is None or end_check.cycle_fails
    ex.dfs = counts(walker, rows, traces, ex.wall_s, cycle_fails, cycles)
    return ex


def livelocks(runner: Runner, walker: ExhaustiveWalker, ex: Exploration, traces: dict, echo):
    """The walk's fair cycles, pumped; each confirmed one a failure (the module docstring).
    Returns what the counts keep of each: trace, lap, shift, and the lap's states."""
    out = []
    assert walker.abstraction is not None
    for lasso in fair_cycles(walker.graph, walker.start, walker.abstract, walker.progress):
        if walker.past_deadline():  # each pump is a run of several laps: the budget bounds them too
            out.append({"confirmed": None, "why": "explore.budget_s was spent: not pumped",
                        "trace_len": len(lasso.prefix), "lap_len": len(lasso.lap)})  # fmt: skip
            continue
        got = pump(runner, lasso, walker.abstraction, describe)
        entry = {
            "confirmed": got.confirmed,
            "why": got.why,
            "trace_len": len(lasso.prefix),
            "lap_len": len(lasso.lap),
            "abstract_states": lasso.states,
            "fair": lasso.fair,
            "pumped": f"{got.verdict}: {got.reason}",
            "laps": got.laps,
            "left": got.left,
        }
        # with an end property, a confirmed cycle fails where its pumped run's end does
        row = got.row or {}
        if got.confirmed and ("property_key" not in row or row["property_key"]):
            reason = (
                f"fair cycle: a lap of {len(lasso.lap)} steps entered after "
                f"{len(lasso.prefix)} steps, no token committed, no request left"
            )
            key = failure_key("livelocked", reason, None)
            echo(f"ppx.explore: {key} (pumped: {got.verdict})")
            if key not in ex.failures:
                # the schedule file keeps the pumped run's own end, which its replay reaches
                ex.failures[key] = Failure(key, -1, "exhaustive", -1, got.verdict, reason,
                                           got.choices, got.choices, {}, got.reason)  # fmt: skip
                traces[key] = {
                    "trace_len": len(lasso.prefix),
                    "choice_points": len(choice_points(lasso.prefix)),
                    "replayed": got.verdict == "livelocked",
                }
            entry |= {"key": key, "shift": got.shift, "cycle": got.cycle}
        out.append(entry)
    return out


def counts(
    walker: ExhaustiveWalker,
    rows: list[dict],
    traces: dict,
    wall_s: float,
    cycle_fails=True,
    livelock: list[dict] | None = None,
) -> dict:
    """What the walk did (the exploration's dfs.json, and the summary's keys); a cycle on a
    run's own path fails the walk where `cycle_fails` (always, without an end property).
    `livelock`: the fair cycles, pumped or left unpumped when the budget ran out."""
    st = walker.stats
    failed = any(fails(r) for r in rows) or (cycle_fails and bool(st.cycles)) or bool(traces)
    unchecked = any(c["confirmed"] is None for c in livelock or [])
    proven = walker.exhausted and not unchecked
    verdict = "refuted" if failed else "verified" if proven else "unknown"
    lens = [t["trace_len"] for t in traces.values() if t["trace_len"] is not None]
    return {
        "runs": walker.runs,
        "blocked": walker.blocked,
        "skipped": walker.skipped,
        "exhausted": walker.exhausted,
        "verdict": verdict,
        "states": st.states if walker.fp is not None else None,
        "transitions": st.transitions if walker.fp is not None else None,
        "cached": st.cached,
        "cycles": len(st.cycles),
        "depth": st.depth,
        "ends": len({r["end"] for r in rows}),
        "wall_s": round(wall_s, 3),
        "states_per_s": round(st.states / wall_s, 1) if wall_s and walker.fp else None,
        "trace_len": min(lens) if lens else None,
        "traces": traces,
        "livelock": livelock or [],
    }


def summary_keys(ex: Exploration) -> dict:
    """The summary.json keys the issue names, from the walk's counts."""
    d = ex.dfs or {}
    # a fair cycle's lap states are in livelock.json (liveness_report.py), not repeated here
    cycles = [{k: v for k, v in c.items() if k != "cycle"} for c in d.get("livelock") or []]
    return {k: d.get(k) for k in KEYS} | {
        "exhaustive": {k: v for k, v in d.items() if k not in KEYS} | {"livelock": cycles}
    }
