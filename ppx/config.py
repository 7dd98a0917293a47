"""Structured configs: the schema every composed config is checked against before any spawn.

A typo, an unknown key or an impossible shape is one clear line naming the key, exit non-zero,
and no child process started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

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
    told_scope: str = "pass"  # pass (#1063) | promise (#1059) | epoch (#1061): needs flips
    geometry: str = "told"  # decision: told (rank 0's lengths) | rederive (the log's adder)
    reconcile: str = "slot"  # slot (#798) | scheduler (one scheduler-wide chunked pointer)
    void: str = "requeue"  # requeue | keep (#797b pp_void_keeps_request)


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


@dataclass
class KernelsCfg:
    name: str = "torch"


@dataclass
class KVCfg:
    pool_tokens: int = 4096
    pool_per_rank: list[int] | None = None
    host_tier: bool = False
    prefetch_ms: list[float] | None = None  # per-rank prefetch completion time


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
    horizon: int = 20000  # pct: choice points over which change points are drawn
    bound: int = 0  # dfs: branch only at the first `bound` choice points (required, > 0)
    replay: str | None = None  # a schedule.txt to replay (strategy replay)
    step_us: float = 1000.0  # virtual time one scheduling step takes (a pp=3 pass: ~30 ms)
    max_steps: int = 2_000_000  # a run longer than this ends `timeout`
    batch: int = 25  # ppx.explore: one progress line per this many schedules


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


def _positive(cfg: DictConfig, keys: list[str]) -> None:
    for k in keys:
        v = OmegaConf.select(cfg, k)
        if v is None or v <= 0:
            raise ConfigError(f"{k} must be positive, got {v}")


def validate(cfg: DictConfig) -> DictConfig:
    """Merge onto the schema (unknown keys and wrong types fail here) and check shapes."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(PPXConfig), cfg)
    except Exception as e:  # omegaconf raises several types; all mean "bad config"
        msg = str(e).splitlines()[0]
        key = getattr(e, "full_key", None)
        raise ConfigError(f"{key}: {msg}" if key else msg) from None
    validate_model(merged)
    _positive(
        merged,
        [
            "pp",
            "tp",
            "model.vocab",
            "model.hidden",
            "model.layers",
            "model.heads",
            "model.kv_heads",
            "model.intermediate",
            "model.max_context",
            "engine.chunk_size",
            "engine.max_batch",
            "engine.max_reqs",
            "engine.kv.pool_tokens",
            "workload.num_requests",
            "workload.max_new",
            "workload.concurrency",
            "workload.prompt_min",
            "watch.stall_s",
            "watch.max_run_s",
            "watch.shutdown_grace_s",
        ],
    )
    m, pp, tp = merged.model, merged.pp, merged.tp
    if m.layers % pp:
        raise ConfigError(f"model.layers={m.layers} is not divisible by pp={pp}")
    if m.hidden % m.heads:
        raise ConfigError(f"model.hidden={m.hidden} is not divisible by model.heads={m.heads}")
    if m.heads % m.kv_heads:
        raise ConfigError(f"model.heads={m.heads} is not divisible by model.kv_heads={m.kv_heads}")
    for name, n in (
        ("model.heads", m.heads),
        ("model.kv_heads", m.kv_heads),
        ("model.intermediate", m.intermediate),
    ):
        if n % tp:
            raise ConfigError(f"{name}={n} is not divisible by tp={tp}")
        if merged.flip.enabled and n % pp:
            raise ConfigError(
                f"{name}={n} is not divisible by pp={pp} (the flip's TP phase uses all ranks)"
            )
    if tp != 1:
        raise ConfigError(
            "tp must be 1: a hybrid pp x tp world is not built yet (the flip's TP phase uses pp ranks)"
        )
    if m.dtype not in ("float32", "bfloat16", "float16"):
        raise ConfigError(f"model.dtype={m.dtype!r}: expected float32, bfloat16 or float16")
    if merged.device not in ("cpu", "cuda") and not str(merged.device).startswith("cuda:"):
        raise ConfigError(f"device={merged.device!r}: expected cpu or cuda")
    if merged.device != "cpu":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"device={merged.device}: CUDA is not available on this machine")
    pms = merged.engine.kv.prefetch_ms
    if pms is not None and len(pms) != pp:
        raise ConfigError(f"engine.kv.prefetch_ms has {len(pms)} entries for pp={pp}")
    ppr = merged.engine.kv.pool_per_rank
    if ppr is not None and len(ppr) != pp:
        raise ConfigError(f"engine.kv.pool_per_rank has {len(ppr)} entries for pp={pp}")
    from ppx.engine.admission.validate import validate_protocol
    from ppx.engine.ring import validate_ring

    try:
        validate_protocol(merged)
        validate_ring(merged)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if merged.engine.transport not in ("gloo", "nccl", "sim"):
        raise ConfigError(f"engine.transport={merged.engine.transport!r}: gloo | nccl | sim")
    validate_explore(merged)
    if merged.engine.transport == "nccl":
        import torch

        if not str(merged.device).startswith("cuda") or torch.cuda.device_count() < pp:
            raise ConfigError(
                f"engine.transport=nccl needs device=cuda and one CUDA device per rank "
                f"(pp={pp}, found {torch.cuda.device_count()})"
            )
    f = merged.faults
    from ppx.core import Kind

    for key in ("delay_kind", "lose_kind"):
        kind = f[key]
        if kind is not None and str(kind).upper() not in Kind.__members__:
            raise ConfigError(f"faults.{key}={kind!r}: {' | '.join(k.label for k in Kind)}")
    if f.corrupt_rank >= 0 and f.corrupt_rank != pp - 1 or f.corrupt_rank < -2:
        raise ConfigError(
            f"faults.corrupt_rank={f.corrupt_rank}: tokens are sampled on the last rank "
            f"({pp - 1}, or -2 for whichever is last; -1 = off)"
        )
    if merged.workload.prompt_min > merged.workload.prompt_max:
        raise ConfigError("workload.prompt_min > workload.prompt_max")
    validate_text(merged)
    from ppx.engine.loop import parse_ordering

    try:
        steps = parse_ordering(list(merged.engine.ordering.steps))
    except ValueError as e:
        raise ConfigError(f"engine.ordering.steps: {e}") from None
    if merged.engine.admission.name != "rank_local":
        parts = {(s.name, s.part) for s in steps}
        if not (
            {("decision", "")} & parts or {("decision", "send"), ("decision", "recv")} <= parts
        ):
            raise ConfigError(
                f"engine/ordering={merged.engine.ordering.name} has no decision step, which "
                f"engine/admission={merged.engine.admission.name} needs (try engine/ordering=decision_first)"
            )
    return merged


def validate_explore(merged: DictConfig) -> None:
    """The simulator's knobs; a replay file is checked against this very config."""
    from ppx.sim.strategy import STRATEGIES

    x = merged.explore
    if x.strategy not in STRATEGIES:
        raise ConfigError(f"explore.strategy={x.strategy!r}: {' | '.join(STRATEGIES)}")
    if x.strategy == "dfs" and x.bound <= 0:
        raise ConfigError("explore.strategy=dfs needs a bound: explore.bound=N (choice points)")
    if x.strategy == "pct" and x.depth < 1:
        raise ConfigError(f"explore.depth={x.depth}: pct needs a bug depth >= 1")
    if x.schedules <= 0 or x.step_us <= 0 or x.max_steps <= 0:
        raise ConfigError(
            "explore.schedules, explore.step_us and explore.max_steps must be positive"
        )
    if x.replay is not None:
        if merged.engine.transport != "sim":
            raise ConfigError("explore.replay needs engine.transport=sim")
        from ppx.sim.schedule import ScheduleError, config_hash, load

        try:
            sch = load(x.replay)
        except ScheduleError as e:
            raise ConfigError(str(e)) from None
        if sch.config_hash != config_hash(merged):
            raise ConfigError(
                f"explore.replay={x.replay}: the schedule was recorded for another config "
                f"(hash {sch.config_hash[:12]} != {config_hash(merged)[:12]}); replay it with "
                f"the overrides in its header: {sch.overrides}"
            )


def validate_model(merged: DictConfig) -> None:
    """model=hf: the checkpoint directory fills the model's shape (ppx/engine/model/hf_config)."""
    if merged.model.name == "hf" or merged.model.path is not None:
        from ppx.engine.model.hf_config import HFError, resolve

        try:
            resolve(merged.model)
        except HFError as e:
            raise ConfigError(str(e)) from None
    if merged.oracle.sample <= 0:
        raise ConfigError(f"oracle.sample={merged.oracle.sample}: a fraction in (0, 1] or a count")


def validate_text(merged: DictConfig) -> None:
    """The tokenizer against the vocab and a JSONL workload's lines (ppx/frontend/text)."""
    from ppx.frontend.text import TextError, check_text

    try:
        check_text(merged)
    except TextError as e:
        raise ConfigError(str(e)) from None
