"""`python -m ppx.explore explore.scenarios=N`: the explorer draws its own scenarios.

Hypothesis draws N scenarios (scenario.py) within the composed design; each runs
`explore.scenario_schedules` schedules (random and PCT by turns). Each scenario's counters
feed the coverage (coverage.py), and its novelty -- mechanisms that fired in few scenarios so
far -- is Hypothesis's `target`, so the search climbs toward what has not run yet. The first
failing schedule stops the search; the scenario shrinks, first greedily (scenario_shrink.py:
its requests deleted, then its parts switched off), then by Hypothesis's shrinker with the
time left (a candidate counts as failing only as the find does: `same_failure`), then by
the search itself capped below the best's requests (scenario_smaller.py), the schedule
shrinker (shrink.py) shrinks the smallest scenario's schedule, and the pair is saved as
`failures/0/scenario.json` (its overrides) and `schedule.txt`, replayed exactly once before
it is saved, with the command that replays it as a full run. `explore.budget_s` bounds the
search, `explore.shrinker.scenario_s` every stage of the scenario's shrink (0: unbounded;
the capped search then stops after its idle rounds). The design
decides which mechanism groups can fire at all (design_scope.py): summary.json's
`mechanisms_absent`, apart from `mechanisms_missing`.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd
from hypothesis import Phase, reject, target

from ppx.config import ConfigError
from ppx.sim.coverage import Coverage
from ppx.sim.design_scope import absent, open_switches
from ppx.sim.report import replay_command
from ppx.sim.runner import COLUMNS, Result, Runner
from ppx.sim.scenario import Scenario, compose, flips_refused, scenarios, search
from ppx.sim.scenario_shrink import same_failure, shrink_scenario
from ppx.sim.scenario_smaller import search_smaller
from ppx.sim.schedule import Schedule, config_hash, save
from ppx.sim.shrink import shrink
from ppx.sim.strategy import PctStrategy, RandomStrategy, ReplayStrategy
from ppx.sim.timing import sim_tasks


@dataclass
class Find:
    scenario: Scenario
    result: Result
    strategy: str
    seed: int


# scenarios per Hypothesis search: its targeting phase starts at half of them (ROUND // 2)
ROUND = 24


@dataclass
class Shrinking:
    """The scenario shrink's clock and candidates run, per stage."""

    t0: float = 0.0  # when the find was made: explore.shrinker.scenario_s runs from here
    greedy_runs: int = 0  # scenario_shrink's candidates (first)
    hypothesis_runs: int = 0  # Hypothesis's shrink candidates (with the time left)
    smaller_runs: int = 0  # scenario_smaller's capped search (with what is left after)


class _Failed(Exception):
    """Raised inside the property: this scenario fails with the failure key searched for."""


class _OutOfTime(Exception):
    """Raised inside the property once `explore.budget_s` is spent: Hypothesis has no other
    way to end a search early; it shrinks this "failure" at once (every call raises it
    without running anything) and re-raises it, and the search ends there."""


class ScenarioSearch:
    def __init__(self, base, log, echo=print, overrides: Iterable[str] = ()) -> None:
        x = base.explore
        self.base, self.log, self.echo = base, log, echo
        # the Hydra overrides that composed the design: a switch they name is never drawn
        self.overrides = tuple(overrides)
        self.per = int(x.scenario_schedules)
        self.seed0 = int(x.seed)
        self.budget_s, self.shrink_s = float(x.budget_s), float(x.shrinker.scenario_s)
        self.coverage = Coverage()
        self.rows: list[dict] = []
        self.first: Find | None = None
        self.best: Find | None = None  # the smallest failing scenario seen (the shrink's)
        self.found_at: dict = {}
        self.shrink = Shrinking()
        self.t0 = time.time()

    def run_scenario(self, sc: Scenario, record: bool) -> tuple[dict[str, int], Find | None]:
        """The scenario's schedules; the union of their counters, and its first failure."""
        cfg = compose(self.base, sc)
        runner = Runner(cfg, self.log)
        seen: dict[str, int] = {}
        tasks, horizon = sim_tasks(cfg), 0
        for j in range(self.per):
            seed = self.seed0 + j
            if j % 2 == 0:
                name, strat = "random", RandomStrategy(seed)
            else:  # PCT over the length of this scenario's first run, depths 1..3 by turns
                name, strat = "pct", PctStrategy(seed, 1 + (j // 2) % 3, tasks, max(horizon, 1))
            res = runner.run(strat)
            horizon = horizon or len(res.choices)
            for k, v in res.counters.items():
                seen[k] = max(seen.get(k, 0), v)
            if record:
                n = self.coverage.scenarios
                self.rows.append(
                    {"scenario": n, "schedule": len(self.rows), "strategy": name, **res.row}
                    | {"counters": json.dumps(res.counters, sort_keys=True)}
                )
            if res.verdict != "served":
                return seen, Find(sc, res, name, seed)
        return seen, None

    def property(self, sc: Scenario) -> None:
        searching = self.first is None
        if searching and self.out_of_time():
            raise _OutOfTime
        if not searching and self.shrink_out_of_time():
            return  # the shrink's time is spent: the smallest failure so far is kept
        try:
            seen, find = self.run_scenario(sc, record=searching)
        except ConfigError:
            reject()  # a combination the design refuses: not a scenario of it
        if searching:
            target(self.coverage.add(seen), label="novel mechanisms")
            if find is not None:
                self.first = self.best = find
                self.found_at = {
                    "scenarios": self.coverage.scenarios,
                    "schedules": len(self.rows),
                    "s": round(time.time() - self.t0, 3),
                }
                self.shrink.t0 = time.time()
                self.echo(
                    f"ppx.explore: scenario {self.coverage.scenarios - 1} fails: {find.result.key}"
                )
                self.shrink_greedy()
        else:
            self.shrink.hypothesis_runs += 1
            if find is None or not same_failure(find.result.key, self.first.result.key):
                return  # passes, or fails otherwise: not the failure being shrunk
            if find.scenario.size() <= self.best.scenario.size():
                self.best = find
        if find is not None:  # one raise site: Hypothesis tells failures apart by where
            raise _Failed(find.result.key)

    def shrink_out_of_time(self) -> bool:
        return bool(self.shrink_s) and time.time() - self.shrink.t0 > self.shrink_s

    def shrink_greedy(self) -> None:
        """The find's requests deleted and its parts switched off first (scenario_shrink.py),
        within the shrink's time; Hypothesis's shrinker gets the rest and keeps a candidate
        only if it is no larger than what this pass kept."""

        def fails(c: Scenario) -> bool:
            try:
                _, find = self.run_scenario(c, record=False)
            except ConfigError:
                return False  # a combination the design refuses
            if find is None or not same_failure(find.result.key, self.first.result.key):
                return False
            self.best = find
            return True

        _, runs = shrink_scenario(self.best.scenario, fails, self.shrink_out_of_time)
        self.shrink.greedy_runs += runs  # the capped search shrinks each of its finds too

    def search(self, n: int) -> None:
        """`n` scenarios in rounds of ROUND, each its own Hypothesis search (seed, round):
        Hypothesis hill-climbs on `target` only once half a search's examples have run, so
        one search of 100,000 would never steer within a budget of seconds. The coverage,
        and so the novelty each round climbs on, is kept across rounds."""
        done, k = 0, 0
        while done < n and self.first is None and not self.out_of_time():
            m = min(ROUND, n - done)
            self.search_round(m, self.seed0 + k)
            done, k = done + m, k + 1

    def out_of_time(self) -> bool:
        return bool(self.budget_s) and time.time() - self.t0 > self.budget_s

    def search_round(self, n: int, seed: int) -> None:
        phases = (Phase.generate, Phase.target, Phase.shrink)
        draws = scenarios(self.base, self.overrides)
        try:
            search(draws, self.property, n, seed, phases, (_Failed, _OutOfTime))
        except Exception as e:  # Hypothesis's own end when a time budget cut the shrink
            # (a final re-run that passed is `Flaky`): the smallest failure seen is kept
            if self.first is None:
                raise
            print(f"hypothesis: {type(e).__name__}: {e!r}"[:2000], file=self.log)


def explore_scenarios(base, out_dir: str, overrides: list[str], echo, config_name: str) -> dict:
    """Search, shrink, save; the summary.json row of the exploration."""
    x = base.explore
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "ranks.log"), "w") as log:
        s = ScenarioSearch(base, log, echo, overrides)
        s.search(int(x.scenarios))
        if s.first is not None:
            search_smaller(s, ROUND)
        wall = time.time() - s.t0
        failures = {}
        found = None
        if s.first is not None:
            found = _save(s, base, out_dir, overrides, config_name, log, echo)
            failures[s.first.result.key] = found["schedule"]
    df = pd.DataFrame(s.rows, columns=["scenario", *COLUMNS, "counters"])
    df.to_parquet(os.path.join(out_dir, "explore.parquet"), index=False)
    counts = {k: int(v) for k, v in Counter(df["verdict"]).items()}
    n = len(df)
    out = {
        "scenarios": s.coverage.scenarios,
        "schedules": n,
        "wall_s": round(wall, 3),
        "schedules_per_s": round(n / wall, 2) if wall else None,
        "verdicts": counts,
        "tokens_checked": int(df["tokens_checked"].sum()) if n else 0,
        "failures": failures,
        "verdict": s.first.result.verdict if s.first else ("served" if n else "none"),
        "reason": f"{s.coverage.scenarios} scenarios, {n} schedules: {counts}",
        "found": found,
        **s.coverage.as_dict(absent(base, open_switches(base, overrides), flips_refused(base))),
    }
    return out


def _save(s: ScenarioSearch, base, out_dir, overrides, config_name, log, echo) -> dict:
    """The smallest failing scenario's schedule shrunk, replayed exactly, written."""
    best, first = s.best, s.first
    pp = int(base.pp)
    cfg = compose(base, best.scenario)
    runner = Runner(cfg, log)
    sh = shrink(runner, best.result, int(base.explore.shrinker.runs))
    again = runner.run(ReplayStrategy(sh.choices))
    replayed = again is not None and again.key == best.result.key
    d = os.path.join(out_dir, "failures", "0")
    os.makedirs(d, exist_ok=True)
    path = os.path.abspath(os.path.join(d, "schedule.txt"))
    over = [*overrides, *best.scenario.overrides(pp)]
    r = best.result
    runs = s.shrink.greedy_runs + s.shrink.hypothesis_runs + s.shrink.smaller_runs
    save(path, Schedule(config_hash(cfg), over, best.strategy, best.seed, r.verdict, sh.choices))
    first_over = [*overrides, *first.scenario.overrides(pp)]
    save(
        os.path.join(d, "original.txt"),
        Schedule(
            config_hash(compose(base, first.scenario)), first_over, first.strategy, first.seed,
            first.result.verdict, first.result.choices,
        ),
    )  # fmt: skip
    found = {
        "key": r.key,
        "key_as_found": first.result.key,  # the shrink keeps the key less a list (same_failure)
        "verdict": r.verdict,
        "reason": r.row["reason"],
        "to_find": s.found_at,
        "requests": [first.scenario.load.num_requests, best.scenario.load.num_requests],
        "scenario": best.scenario.as_dict(),
        "overrides": best.scenario.overrides(pp),
        "scenario_shrink_runs": runs,
        "scenario_shrink": {
            "greedy_runs": s.shrink.greedy_runs, "hypothesis_runs": s.shrink.hypothesis_runs,
            "smaller_runs": s.shrink.smaller_runs,
        },
        "schedule_shrink": {
            "delays": list(sh.delays), "choice_points": list(sh.length), "runs": sh.runs,
        },
        "replayed": replayed,
        "schedule": path,
        "replay": replay_command(over, path, config_name),
    }  # fmt: skip
    with open(os.path.join(d, "scenario.json"), "w") as fh:
        json.dump(found, fh, indent=1)
    echo(
        f"ppx.explore: failure: {r.key}; scenario shrunk {found['requests'][0]} -> "
        f"{found['requests'][1]} requests in {s.shrink.greedy_runs} + {s.shrink.hypothesis_runs} + "
        f"{s.shrink.smaller_runs} runs (greedy + Hypothesis + a capped search), schedule {sh.length[0]} -> "
        f"{sh.length[1]} choice points; replayed exactly: {replayed}"
    )
    echo(f"  replay: {found['replay']}")
    return found
