"""The explorer's keys, checked before anything runs (called by ppx.validation)."""

from __future__ import annotations

from ppx.config import ConfigError
from ppx.sim.dfs import REDUCTIONS
from ppx.sim.strategy import MEMBERS


def check_explore(x) -> None:
    members = list(x.portfolio) if x.strategy == "portfolio" else [x.strategy]
    if x.strategy == "portfolio" and (not members or any(m not in MEMBERS for m in members)):
        raise ConfigError(
            f"explore.portfolio={list(x.portfolio)}: a non-empty list of {' | '.join(MEMBERS)}"
        )
    if x.reduce not in REDUCTIONS:
        raise ConfigError(f"explore.reduce={x.reduce!r}: {' | '.join(REDUCTIONS)}")
    if "dfs" in members:
        if x.bound < 0 or (x.bound == 0 and x.delays is None):
            raise ConfigError(
                "explore.strategy=dfs needs a bound: explore.bound=N (steps) and/or "
                "explore.delays=K"
            )
        if x.delays is not None and x.delays < 0:
            raise ConfigError(f"explore.delays={x.delays}: a count of delays, >= 0")
        if x.delays is not None and x.reduce == "sleep":
            raise ConfigError(
                "explore.delays with explore.reduce=sleep: a delay-bounded tree is not closed "
                "under reordering, so the reduction could lose schedules; set "
                "explore.reduce=none"
            )
    if x.strategy == "exhaustive" and (x.workers > 1 or x.shards > 1):
        raise ConfigError(
            "explore.strategy=exhaustive: one walk on one process (explore.workers=1, "
            "explore.shards=1)"
        )
    if "pct" in members and x.depth < 1:
        raise ConfigError(f"explore.depth={x.depth}: pct needs a bug depth >= 1")
    if x.workers < 1 or x.shards < 1 or not 0 <= x.shard < x.shards:
        raise ConfigError(
            f"explore.workers={x.workers}, explore.shard={x.shard}, explore.shards="
            f"{x.shards}: workers >= 1 and 0 <= shard < shards"
        )
    if x.workers > 1 and x.shards > 1:
        raise ConfigError(
            "explore.workers and explore.shards: a launcher job is one shard, on one process"
        )
    if x.scenarios < 0 or x.scenario_schedules < 1 or x.budget_s < 0 or x.shrink_s < 0:
        raise ConfigError(
            f"explore.scenarios={x.scenarios}, explore.scenario_schedules="
            f"{x.scenario_schedules}, explore.budget_s={x.budget_s}, explore.shrink_s="
            f"{x.shrink_s}: scenarios >= 0, schedules per scenario >= 1, seconds >= 0"
        )
    if x.scenarios > 0 and (x.workers > 1 or x.shards > 1):
        raise ConfigError("explore.scenarios runs in one process: set explore.workers=1")
    if x.shrink < 0:
        raise ConfigError(f"explore.shrink={x.shrink}: runs per failure, >= 0 (0: off)")
