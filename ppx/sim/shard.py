"""One shard of an exploration: the schedules it owns, run and judged, failures shrunk.

Shard w of N owns schedule indices i < explore.schedules with i mod N == w. A seeded
schedule is the same run whichever shard runs it (random: seed + i; pct: seed + i at depth
d or 1 + i mod d), so N only changes who runs what. A dfs shard walks the subtrees of the
first step's tasks t with t mod N == w (its k-th schedule is index k N + w); a portfolio's
schedule i goes to member i mod M. Local workers (fanout.py) and Hydra launcher jobs run
the same shards and merge them the same way (merge.py).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from ppx.sim.dfs import DfsWalker, ProbeStrategy
from ppx.sim.registry import members_of, reduction_of
from ppx.sim.runner import Runner
from ppx.sim.shrink import shrink
from ppx.sim.strategy import RandomStrategy
from ppx.sim.timing import sim_tasks


@dataclass
class Failure:
    key: str
    index: int
    strategy: str
    seed: int
    verdict: str
    reason: str
    original: list[tuple[int, int]]
    choices: list[tuple[int, int]]  # the shrunk schedule (the original when nothing shrank)
    shrink: dict
    shrunk_reason: str = ""  # the shrunk schedule's own reason (empty: the original's)


@dataclass
class ShardResult:
    shard: int
    rows: list[dict] = field(default_factory=list)
    failures: dict[str, Failure] = field(default_factory=dict)
    dfs: dict | None = None  # runs, blocked, skipped, exhausted
    wall_s: float = 0.0


class Plan:
    """Which strategy runs schedule i of this shard."""

    def __init__(self, cfg, shard: int, shards: int, runner: Runner) -> None:
        x = cfg.explore
        self.x, self.shard, self.shards = x, shard, shards
        self.n, self.seed0 = int(x.schedules), int(x.seed)
        self.tasks = sim_tasks(cfg)
        self.members = members_of(x)
        self.walker = None
        if any(k.walk for k in self.members):
            root = [t for t in range(self.tasks) if t % shards == shard] if shards > 1 else None
            delays = None if x.dfs.delays is None else int(x.dfs.delays)
            self.walker = DfsWalker(int(x.dfs.bound), reduction_of(x).sleep, delays, root)
            for t in self.walker.probes(self.tasks):
                runner.run(ProbeStrategy(self.walker, t))
        self.horizon = int(x.pct.horizon)
        if self.horizon <= 0 and any(k.calibrates for k in self.members):
            # PCT draws its change points over the run's length: calibrate it on one random
            # run (the same in every shard, so schedule i is the same whoever runs it)
            cal = runner.run(RandomStrategy(self.seed0))
            self.horizon = max(len(cal.choices) if cal else 1, 1)

    def schedules(self):
        """(index, member, strategy, seed) for each schedule this shard runs."""
        m = len(self.members)
        dfs_k = 0
        for i in range(self.shard, self.n, self.shards):
            kind = self.members[i % m]
            if kind.walk:
                w = self.walker
                if w.exhausted:
                    continue
                index = i if m > 1 else dfs_k * self.shards + self.shard
                dfs_k += 1
                yield index, kind.name, w.strategy(), -1
            else:
                seed = self.seed0 + i
                yield i, kind.name, kind.draw(self.x, i // m, seed, self.tasks, self.horizon), seed


def run_plan(plan: Plan, runner: Runner):
    """(index, member, seed, result) per schedule of the plan; a dfs run the reduction cut
    is no schedule: the walk goes on to the next one."""
    for index, name, strategy, seed in plan.schedules():
        res = runner.run(strategy)
        if strategy.watches_steps:  # the walk's run: the reduction may have cut it
            plan.walker.record(blocked=res is None)
            while res is None and not plan.walker.exhausted:
                res = runner.run(plan.walker.strategy())
                plan.walker.record(blocked=res is None)
            if res is None:
                continue
        yield index, name, seed, res


def run_shard(cfg, shard: int, shards: int, echo=print, log=None) -> ShardResult:
    x = cfg.explore
    t0 = time.time()
    runner = Runner(cfg, log)
    plan = Plan(cfg, shard, shards, runner)
    out = ShardResult(shard)
    budget = int(x.shrinker.runs)
    tag = f"worker {shard}/{shards}: " if shards > 1 else ""
    owned = len(range(shard, int(x.schedules), shards))
    counts: Counter[str] = Counter()
    for index, name, seed, res in run_plan(plan, runner):
        out.rows.append({"schedule": index, "strategy": name, **res.row})
        if res.verdict != "served" and res.key not in out.failures:
            s = shrink(runner, res, budget) if budget > 0 else None
            out.failures[res.key] = Failure(
                res.key, index, name, seed,
                res.verdict, res.row["reason"], res.choices,
                s.choices if s else res.choices,
                {} if s is None else {
                    "delays": list(s.delays), "choice_points": list(s.length),
                    "runs": s.runs, "replayed": s.replayed,
                },
                s.reason if s else "",
            )  # fmt: skip
            echo(f"ppx.explore: {tag}schedule {index} fails: {res.key}")
        counts[res.verdict] += 1
        k = len(out.rows)
        if k % int(x.fanout.batch) == 0 or k == owned:
            rate = k / max(time.time() - t0, 1e-9)
            echo(f"ppx.explore: {tag}{k}/{owned} schedules {dict(counts)} ({rate:.1f} schedules/s)")
    if plan.walker is not None:
        w = plan.walker
        out.dfs = {
            "runs": w.runs,
            "blocked": w.blocked,
            "skipped": w.skipped,
            "exhausted": w.exhausted,
        }
    out.wall_s = time.time() - t0
    return out
