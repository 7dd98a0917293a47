"""Structured configs: the schema every composed config is checked against before any spawn.

A typo, an unknown key or an impossible shape is one clear line naming the key, exit non-zero,
and no child process started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ppx.config_sim import ExploreCfg, SimCfg
from ppx.fault_sections import FaultsCfg  # one section per fault (ppx/engine/faults/)
from ppx.protocol.registry import default


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
class BenchCfg:
    """The serving benchmarks' knobs (vllm bench serve / sglang.bench_serving; docs/running.md)."""

    input_len: int = 0  # > 0: random prompt lengths in vLLM's input_len +- range_ratio
    output_len: int = 0  # > 0: output lengths likewise (sharegpt: a fixed output length)
    range_ratio: float = 0.0
    burstiness: float = 1.0  # gamma inter-arrivals (vLLM's rule); 1 = Poisson
    max_concurrency: int = 0  # > 0: at most this many in flight, whatever the arrivals
    prompts_per_group: int = 0  # generated_shared_prefix: requests per shared system prompt
    repeat_count: int = 1  # each prompt served this many times in a row (vLLM's --repeat-count)


@dataclass
class TraceCfg:
    """workload=trace: the file's format, the window replayed and its scales."""

    format: str | None = None  # azure | burstgpt | mooncake
    window_start_s: float = 0.0
    window_s: float = 0.0  # 0: to the trace's end
    time_scale: float = 1.0  # run seconds per trace second
    token_scale: float = 1.0  # run tokens per trace token (a small model's context)


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
    path: str | None = None  # workload=jsonl / sharegpt / trace: the file
    # prompt indices left out: request i serves the i-th prompt not skipped, drawn as the full
    # run drew it (a shrunk scenario's requests deleted from the middle; a replay line carries it)
    skip: list[int] = field(default_factory=list)
    bench: BenchCfg = field(default_factory=BenchCfg)
    trace: TraceCfg = field(default_factory=TraceCfg)


@dataclass
class PrefetchCfg:
    """What admission does about a host-tier prefetch still in flight (engine.kv.host_tier)."""

    floor: str = default("engine.admission.prefetch.floor")
    bound_ms: float = 1000.0  # floor=group: how long a rid waits on a pending peer, then clamp
    short: str = default("engine.admission.prefetch.short")


@dataclass
class AdmissionCfg:
    # every protocol switch's designs and default: ppx/protocol/registry.py
    # (`python -m ppx.protocol` prints the table; docs/protocols.md holds it)
    name: str = default("engine.admission.name")
    on_refusal: str | None = default("engine.admission.on_refusal")
    retraction: str = default("engine.admission.retraction")
    told_scope: str = default("engine.admission.told_scope")
    geometry: str = default("engine.admission.geometry")
    reconcile: str = default("engine.admission.reconcile")
    void: str = default("engine.admission.void")
    batch_order: str = default("engine.admission.batch_order")
    local_extent: str = default("engine.admission.local_extent")
    follower_seats: str = default("engine.admission.follower_seats")
    prefetch: PrefetchCfg = field(default_factory=PrefetchCfg)
    # issue 26 (#1180, #798, #959): the row probe, continuations per slot, the #959 guard
    row_probe: str = default("engine.admission.row_probe")
    continuations: str = default("engine.admission.continuations")
    second_continuation: str = default("engine.admission.second_continuation")


@dataclass
class OrderingCfg:
    name: str = "upstream"
    steps: list[Any] = field(default_factory=list)
    # rank number | first | middle | last | even | odd -> that rank's own steps (ordering.py)
    per_rank: dict[str, Any] = field(default_factory=dict)
    output_recv: str = default("engine.ordering.output_recv")
    void_relay: str = default("engine.ordering.void_relay")


@dataclass
class GuardCfg:
    name: str = default("engine.guard.name")
    defer_cap: int = 3  # <= 0 disables the bound (sgl-project#944)
    miss: str = default("engine.guard.miss")
    prefix_clear: str = default("engine.guard.prefix_clear")
    defer_streak: str = default("engine.guard.defer_streak")
    unit: str = default("engine.guard.unit")


@dataclass
class KernelsCfg:
    name: str = "torch"


@dataclass
class KVCfg:
    pool_tokens: int = 4096
    pool_per_rank: list[int] | None = None
    host_tier: bool = False
    prefetch_ms: list[float] | None = None  # per-rank prefetch completion time
    load_back: str = default("engine.kv.load_back")


@dataclass
class LivenessCfg:
    """The bounds past which rank 0 calls a run livelocked or stalled."""

    livelock_passes: int = 64
    # passes rank 0 runs with requests outstanding and no token committed -> stalled (0 = off)
    stall_passes: int = 2000
    # flip churn (flip.due): cutovers / re-admitted residents with no token committed (0 = off)
    livelock_flips: int = 32
    livelock_readmits: int = 256


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
    readiness: bool = default("engine.readiness")
    readiness_budget_s: float = 2.0
    liveness: LivenessCfg = field(default_factory=LivenessCfg)
    transport: str = "gloo"  # gloo | nccl (one GPU per rank) | sim (one process, deterministic)
    # forkserver: ranks forked from one process that imported the engine once | spawn: a fresh
    # interpreter per rank (what a planted sitecustomize needs)
    start_method: str = "forkserver"
    width_check: str = default("engine.width_check")


@dataclass
class FlipCfg:
    name: str = "off"
    enabled: bool = False
    # both counted from the pass that takes the run's first request, then from each cutover
    every_s: float = 0.0
    every_passes: int = 0
    start_phase: str = default("flip.start_phase")
    inflight: str = default("flip.inflight")
    max_flips: int = 0  # 0 = unbounded
    epoch_advance: str = default("flip.epoch_advance")
    seam_tail: str = default("flip.seam_tail")
    continuation: str = default("flip.continuation")  # issue 26 (#959)
    due: str = default("flip.due")
    drain_cap: int = 64  # flip.due=drained: the most passes a due flip waits on a prefill


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
    # requests outstanding and no token committed for this long -> stalled (virtual seconds on
    # the simulator; rank 0's engine.liveness.stall_passes usually names it first)
    progress_stall_s: float = 30.0


@dataclass
class OracleCfg:
    sample: float = 1.0  # requests checked: a fraction in (0, 1], or a count when > 1
    # near-tie margin; null: 1e-3 for a float32 model, 0.1 for bf16 / fp16 (the reference is
    # fp32, and a bf16 stage parts from it by a few hundredths of a logit)
    tol: float | None = None
    # a carried continuation's KV rows against a fresh prefill at the cutover
    # (flip.continuation=survive): a wrong row stops the run by name (engine/carry_check.py)
    carry_check: bool = True


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
    sim: SimCfg = field(default_factory=SimCfg)
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
