"""Structured configs: the schema every composed config is checked against before any spawn.

A typo, an unknown key or an impossible shape is one clear line naming the key, exit non-zero,
and no child process started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ppx.engine.shapes import dims_of, pool_sizes  # noqa: F401 - re-exported for callers


@dataclass
class ModelCfg:
    name: str = "tiny"
    vocab: int = 256
    hidden: int = 192
    layers: int = 12
    heads: int = 24
    kv_heads: int = 12
    intermediate: int = 384
    rope_theta: float = 10000.0
    eps: float = 1e-5
    logit_scale: float = 12.0
    max_context: int = 512
    dtype: str = "float32"  # model=hf: auto = the checkpoint's own dtype
    path: str | None = None  # model=hf: a Hugging Face model directory (config.json + safetensors)
    tokenizer: str | None = None  # a tokenizer.json (default: model.path/tokenizer.json if present)


@dataclass
class WorkloadCfg:
    name: str = "shared_prefix"
    num_requests: int = 32
    num_prefixes: int = 1
    prefix_len: int = 96
    prompt_min: int = 8
    prompt_max: int = 24
    max_new: int = 16
    concurrency: int = 8
    rate: float = 0.0  # requests/s; > 0 switches from closed loop to a Poisson arrival process
    duration_s: float = 0.0  # > 0: keep submitting (closed loop) until this much time passed
    path: str | None = None  # workload=jsonl: one {"prompt": ...} or {"messages": ...} per line


@dataclass
class AdmissionCfg:
    name: str = "rank_local"
    on_refusal: str | None = None  # forwarded: void | stop; the other policies ignore it
    # pass (#1063) | promise (#1059) | epoch (#1061) | epoch_retract (#1061b): needs flips
    told_scope: str = "pass"
    geometry: str = "told"  # decision: told (rank 0's lengths) | rederive (the log's adder)
    reconcile: str = "slot"  # slot (#798) | scheduler (one scheduler-wide chunked pointer)
    void: str = "requeue"  # requeue | keep (#797b pp_void_keeps_request)
    # a follower's prefill order: decision (rank 0's) | queue (its own waiting queue's: the
    # gap #791's forwarded slice 1 named, permuted rows under an equal width)
    batch_order: str = "decision"
    # a held continuation's local: planned (what this rank placed) | completed (the chunks
    # whose results came back: the stagger of the #1071 strand, one chunk behind the told)
    local_extent: str = "planned"
    # sgl-project#1153 F2: ignore (a follower's own seat count is no verdict on a forwarded
    # schedule) | veto (the count gates before F2: it refuses the rids beyond its count)
    follower_seats: str = "ignore"
    # sgl-project#1175: group (rank 0 admits on the group's prefetch completion floor, carried
    # on the lap) | rank0 (its own completion); forwarded execution with a host tier, pp >= 2
    prefetch_floor: str = "group"
    prefetch_bound_ms: float = 1000.0  # group: how long a rid waits on a pending peer, then clamp


@dataclass
class OrderingCfg:
    name: str = "upstream"
    steps: list[Any] = field(default_factory=list)
    output_recv: str = "relayed"  # relayed | occupancy (sgl-project#802); ppx/engine/ring.py
    void_relay: str = "ring"  # ring | first_retracting (#797) | downstream (#1071)


@dataclass
class GuardCfg:
    name: str = "off"  # off | rid | prefix
    defer_cap: int = 3  # <= 0 disables the bound (sgl-project#944)
    miss: str = "sentinel"  # sentinel (-1, deferred) | zero (read as a measurement)
    prefix_clear: str = "serve"  # serve (#963) | never (the withdrawn mutant)
    defer_streak: str = "refusal"  # refusal (#987 Part A) | offer (#944's offer-keyed streak)


@dataclass
class KernelsCfg:
    name: str = "torch"


@dataclass
class KVCfg:
    pool_tokens: int = 4096
    pool_per_rank: list[int] | None = None
    host_tier: bool = False
    prefetch_ms: list[float] | None = None  # per-rank prefetch completion time
    # who starts a load-back: local (every rank at its own match, #1046) | admitted (only for
    # a rid whose extent an admitted decision published, the #1040 chain)
    load_back: str = "local"


@dataclass
class EngineCfg:
    admission: AdmissionCfg = field(default_factory=AdmissionCfg)
    ordering: OrderingCfg = field(default_factory=OrderingCfg)
    guard: GuardCfg = field(default_factory=GuardCfg)
    kernels: KernelsCfg = field(default_factory=KernelsCfg)
    kv: KVCfg = field(default_factory=KVCfg)
    chunk_size: int = 64
    max_batch: int = 16
    max_reqs: int = 64
    readiness: bool = False
    readiness_budget_s: float = 2.0
    livelock_passes: int = 64
    transport: str = "gloo"  # gloo | nccl (one GPU per rank) | sim (one process, deterministic)
    # forkserver: ranks forked from one process that imported the engine once | spawn: a fresh
    # interpreter per rank (what a planted sitecustomize needs)
    start_method: str = "forkserver"
    width_check: str = "fingerprint"  # fingerprint (rows + rids/extend lengths) | rows


@dataclass
class FlipCfg:
    name: str = "off"
    enabled: bool = False
    every_s: float = 0.0
    every_passes: int = 0
    start_phase: str = "pp"
    inflight: str = "drain"  # drain | void
    max_flips: int = 0  # 0 = unbounded
    # when the epoch moves: release (before the residents' re-admission) | completion (after
    # it: the log's clock, sgl-project#1061b); read only by a told row (told_scope)
    epoch_advance: str = "release"
    # the token the TP phase's last batch sampled before a TP->PP cutover: shared (every rank
    # appends it, sgl-project#987's fill tail published) | rank0_local (only rank 0 keeps it)
    seam_tail: str = "shared"


@dataclass
class FaultsCfg:
    name: str = "none"
    delay_kind: str | None = None  # chain | proxy | output | decision | lap
    delay_rank: int = -1
    delay_s: float = 0.0
    kill_rank: int = -1
    kill_after_s: float = 0.0
    epoch_desync_rank: int = -1
    pool_rank: int = -1  # per-rank KV pool skew: this rank gets `pool_tokens` instead
    pool_tokens: int = 0
    lifo_rank: int = -1  # this rank scans its waiting queue newest-first (a scheduling skew)
    drop_void_output: bool = False  # the last rank sends no void output (the pre-#797 bug)
    # corrupt_token: the last rank sends a wrong id for this request's token at this output
    # position (-1 off; -2 = the last rank, whatever pp is); only the oracle can tell
    corrupt_rank: int = -1
    corrupt_rid: int = 0
    corrupt_position: int = 0
    # lose_message: rank `lose_rank` counts its `lose_kind` message number `lose_seq` as sent
    # but never posts it; the receiver meets the next seq and the run ends `mismatch`
    lose_rank: int = -1
    lose_kind: str | None = None  # chain | proxy | output | decision | lap
    lose_seq: int = 0
    # offer_flap: rank 0's radix match for a request loses this many tokens after each void of
    # it and regains them after the next (its unshared extension dropped and recomputed), so
    # a refused rid's offers alternate: boot 7's told 7939 / 0 (sgl-project#987). 0 = off
    offer_flap: int = 0


@dataclass
class LoggerCfg:
    name: str = "wandb"
    mode: str = "offline"  # offline | online | disabled
    project: str = "ppx"
    entity: str | None = None
    group: str | None = None
    tags: list[str] = field(default_factory=list)


@dataclass
class WatchCfg:
    name: str = "default"
    stall_s: float = 4.0
    max_run_s: float = 180.0
    poll_s: float = 0.1
    progress_s: float = 2.0
    blocked_on: bool = True  # the blocked-on records + op ring (off only to measure their cost)
    shutdown_grace_s: float = 15.0  # after the shutdown, ranks that neither leave nor progress


@dataclass
class ExploreCfg:
    """The simulator's knobs (engine.transport=sim) and the explorer's (python -m ppx.explore)."""

    name: str = "default"
    strategy: str = "random"  # random | pct | dfs | replay
    seed: int = 0  # the schedule seed (schedule i of an exploration uses seed + i)
    schedules: int = 100  # how many schedules `ppx.explore` runs
    depth: int = 3  # pct: the bug depth d
    depth_cycle: bool = True  # pct: schedule i runs at depth 1 + i mod d (else d)
    horizon: int = 0  # pct: choice points the change points are drawn over (0: one run's)
    bound: int = 0  # dfs: branch only within the first `bound` steps (0: no step bound)
    delays: int | None = None  # dfs: at most this many choices of a higher runnable task
    reduce: str = "sleep"  # dfs: sleep (sleep sets over step footprints) | none
    portfolio: list[str] = field(default_factory=lambda: ["random", "pct"])  # its members
    replay: str | None = None  # a schedule.txt to replay (strategy replay)
    step_us: float = 1000.0  # virtual time one scheduling step takes (a pp=3 pass: ~30 ms)
    clock: str = "step"  # step (time moves every step) | idle (only when no task can run)
    max_steps: int = 2_000_000  # a run longer than this ends `timeout`
    batch: int = 25  # ppx.explore: one progress line per this many schedules
    shrink: int = 200  # runs spent shrinking each failure found (0: save it as found)
    workers: int = 1  # ppx.explore: local processes the schedules are sharded over
    shard: int = 0  # a launcher job's shard (of `shards`): python -m ppx.explore -m ...
    shards: int = 1


@dataclass
class OracleCfg:
    sample: float = 1.0  # requests checked: a fraction in (0, 1], or a count when > 1
    # near-tie margin; null: 1e-3 for a float32 model, 0.1 for bf16 / fp16 (the reference is
    # fp32, and a bf16 stage parts from it by a few hundredths of a logit)
    tol: float | None = None


@dataclass
class PPXConfig:
    pp: int = 3
    tp: int = 1
    seed: int = 0
    device: str = "cpu"
    model: ModelCfg = field(default_factory=ModelCfg)
    workload: WorkloadCfg = field(default_factory=WorkloadCfg)
    engine: EngineCfg = field(default_factory=EngineCfg)
    flip: FlipCfg = field(default_factory=FlipCfg)
    faults: FaultsCfg = field(default_factory=FaultsCfg)
    logger: LoggerCfg = field(default_factory=LoggerCfg)
    watch: WatchCfg = field(default_factory=WatchCfg)
    explore: ExploreCfg = field(default_factory=ExploreCfg)
    oracle: OracleCfg = field(default_factory=OracleCfg)


GROUP_SCHEMAS = {
    "model": ModelCfg,
    "workload": WorkloadCfg,
    "engine/admission": AdmissionCfg,
    "engine/ordering": OrderingCfg,
    "engine/guard": GuardCfg,
    "engine/kernels": KernelsCfg,
    "flip": FlipCfg,
    "faults": FaultsCfg,
    "logger": LoggerCfg,
    "watch": WatchCfg,
    "explore": ExploreCfg,
}


def register_configs() -> None:
    """Each group's yaml starts from its schema (`defaults: [schema, _self_]`), so every key
    of the schema can be overridden from the command line and types are checked by Hydra."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for group, node in GROUP_SCHEMAS.items():
        cs.store(group=group, name="schema", node=node)


register_configs()


class ConfigError(ValueError):
    pass
