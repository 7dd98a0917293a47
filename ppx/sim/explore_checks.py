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
    if walks:
        if x.bound < 0 or (x.bound == 0 and x.delays is None):
            raise ConfigError(
                "explore.strategy=dfs needs a bound: explore.bound=N (steps) and/or "
                "explore.delays=K"
            )
        if x.delays is not None and x.delays < 0:
            raise ConfigError(f"explore.delays={x.delays}: a count of delays, >= 0")
        if x.delays is not None and sleep:
            raise ConfigError(
                "explore.delays with explore.reduce=sleep: a delay-bounded tree is not closed "
                "under reordering, so the reduction could lose schedules; set "
                "explore.reduce=none"
            )
    if kind.exhaustive and (x.workers > 1 or x.shards > 1):
        raise ConfigError(
            "explore.strategy=exhaustive: one walk on one process (explore.workers=1, "
            "explore.shards=1)"
        )
    if any(k.calibrates for k in registry.members_of(x)) and x.depth < 1:
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
