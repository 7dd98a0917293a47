"""The explorer's keys, checked before anything runs (called by ppx.validation)."""

from __future__ import annotations

from ppx.config import ConfigError
from ppx.engine.transport.sim_nccl_rules import SEMANTICS
from ppx.sim import registry


def check_explore(merged) -> None:
    """`merged`: the whole config (the reduction's soundness depends on the wire's rules)."""
    x = merged.explore
    why = registry.refusal(x)
    if why is not None:
        raise ConfigError(why)
    kind, sleep = registry.strategy_of(x), registry.reduction_of(x).sleep
    walks = any(k.walk and not k.exhaustive for k in registry.members_of(x))
    if sleep and SEMANTICS.of(merged).nccl and any(k.walk for k in registry.members_of(x)):
        # the NCCL plane's holds (a device stream behind a send, a peer's consumed counter)
        # are not in the steps' footprints the sleep sets compare, so two steps the
        # reduction calls independent may not be: it could lose schedules
        raise ConfigError(
            "explore.reduce=sleep with sim.semantics=nccl: the NCCL plane's waits are not "
            "in the step footprints the reduction compares; set explore.reduce=none"
        )
    dfs, fan = x.dfs, x.fanout
    if walks:
        if dfs.bound < 0 or (dfs.bound == 0 and dfs.delays is None):
            raise ConfigError(
                "explore.strategy=dfs needs a bound: explore.dfs.bound=N (steps) and/or "
                "explore.dfs.delays=K"
            )
        if dfs.delays is not None and dfs.delays < 0:
            raise ConfigError(f"explore.dfs.delays={dfs.delays}: a count of delays, >= 0")
        if dfs.delays is not None and sleep:
            raise ConfigError(
                "explore.dfs.delays with explore.reduce=sleep: a delay-bounded tree is not closed "
                "under reordering, so the reduction could lose schedules; set "
                "explore.reduce=none"
            )
    if kind.exhaustive and (fan.workers > 1 or fan.shards > 1):
        raise ConfigError(
            "explore.strategy=exhaustive: one walk on one process (explore.fanout.workers=1, "
            "explore.fanout.shards=1)"
        )
    if any(k.calibrates for k in registry.members_of(x)) and x.pct.depth < 1:
        raise ConfigError(f"explore.pct.depth={x.pct.depth}: pct needs a bug depth >= 1")
    if fan.workers < 1 or fan.shards < 1 or not 0 <= fan.shard < fan.shards:
        raise ConfigError(
            f"explore.fanout.workers={fan.workers}, explore.fanout.shard={fan.shard}, "
            f"explore.fanout.shards={fan.shards}: workers >= 1 and 0 <= shard < shards"
        )
    if fan.workers > 1 and fan.shards > 1:
        raise ConfigError(
            "explore.fanout.workers and explore.fanout.shards: a launcher job is one shard, "
            "on one process"
        )
    if fan.batch < 1:  # the progress line's cadence (a modulus)
        raise ConfigError(f"explore.fanout.batch={fan.batch}: schedules per progress line, >= 1")
    shrink = x.shrinker
    if x.scenarios < 0 or x.scenario_schedules < 1 or x.budget_s < 0 or shrink.scenario_s < 0:
        raise ConfigError(
            f"explore.scenarios={x.scenarios}, explore.scenario_schedules="
            f"{x.scenario_schedules}, explore.budget_s={x.budget_s}, explore.shrinker.scenario_s="
            f"{shrink.scenario_s}: scenarios >= 0, schedules per scenario >= 1, seconds >= 0"
        )
    if x.scenarios > 0 and (fan.workers > 1 or fan.shards > 1):
        raise ConfigError("explore.scenarios runs in one process: set explore.fanout.workers=1")
    if shrink.runs < 0:
        raise ConfigError(f"explore.shrinker.runs={shrink.runs}: runs per failure, >= 0 (0: off)")
