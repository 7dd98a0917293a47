"""Every check a composed config passes before anything is spawned: merged onto the schema
(`ppx.config`), then shapes, divisibility and combinations of switches, each refused with one
line naming the key (ConfigError -> exit 2)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ppx.config import ConfigError, PPXConfig


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
    validate_flip(merged)
    from ppx.engine.admission.validate import validate_protocol
    from ppx.engine.ring import validate_ring

    try:
        validate_protocol(merged)
        validate_ring(merged)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if merged.engine.transport not in ("gloo", "nccl", "sim"):
        raise ConfigError(f"engine.transport={merged.engine.transport!r}: gloo | nccl | sim")
    if merged.engine.start_method not in ("forkserver", "spawn"):
        raise ConfigError(f"engine.start_method={merged.engine.start_method!r}: forkserver | spawn")
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
    flap = int(f.get("offer_flap", 0))
    if flap < 0 or flap > 0 and merged.engine.admission.name not in ("decision", "forwarded"):
        raise ConfigError(
            f"faults.offer_flap={flap}: a token count >= 0, and only rank 0's offer flaps "
            f"(engine/admission=decision or forwarded, not {merged.engine.admission.name})"
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


SEAM_TAILS = ("shared", "rank0_local")
ADVANCES = ("release", "completion")  # flip.epoch_advance


def validate_flip(merged: DictConfig) -> None:
    """The phase flip's switches, all in one place."""
    f = merged.flip
    if f.start_phase not in ("pp", "tp"):
        raise ConfigError(f"flip.start_phase={f.start_phase!r}: pp | tp")
    if f.inflight not in ("drain", "void"):
        raise ConfigError(f"flip.inflight={f.inflight!r}: drain | void")
    validate_epoch_advance(merged)
    validate_seam_tail(merged)


def validate_epoch_advance(merged: DictConfig) -> None:
    """flip.epoch_advance moves the epoch across the residents' re-admission at a cutover;
    the only reader of the epoch there is a told row (sgl-project#1061b)."""
    adv = merged.flip.get("epoch_advance", "release")
    if adv not in ADVANCES:
        raise ConfigError(f"flip.epoch_advance={adv!r}: {' | '.join(ADVANCES)}")
    if adv == "release":
        return
    if not merged.flip.enabled:
        raise ConfigError(
            f"flip.epoch_advance={adv} means nothing without flips: the epoch moves only at a "
            "TP<->PP cutover (set flip=...)"
        )
    if merged.engine.admission.told_scope == "pass":
        raise ConfigError(
            f"flip.epoch_advance={adv} is read only by a told row re-admitted at the cutover, "
            "and engine.admission.told_scope=pass stamps none (promise | epoch | epoch_retract)"
        )


def validate_seam_tail(merged: DictConfig) -> None:
    """flip.seam_tail=rank0_local (sgl-project#987's red) needs a TP->PP cutover and a
    follower to lack the tail."""
    f = merged.flip
    if f.seam_tail not in SEAM_TAILS:
        raise ConfigError(f"flip.seam_tail={f.seam_tail!r}: {' | '.join(SEAM_TAILS)}")
    if f.seam_tail == "shared":
        return
    if not f.enabled:
        raise ConfigError(
            f"flip.seam_tail={f.seam_tail} means nothing without flips: the tail is lost only "
            "at a TP->PP cutover (set flip=...)"
        )
    if merged.pp < 2:
        raise ConfigError(
            f"flip.seam_tail={f.seam_tail} needs pp >= 2: with one rank there is no follower "
            "to lack rank 0's tail"
        )
    if f.max_flips == 1 and f.start_phase == "pp":
        raise ConfigError(
            f"flip.seam_tail={f.seam_tail} with flip.max_flips=1 from the PP phase never "
            "crosses the TP->PP seam (set flip.start_phase=tp or more flips)"
        )


def validate_explore(merged: DictConfig) -> None:
    """The simulator's knobs; a replay file is checked against this very config."""
    from ppx.sim.strategy import STRATEGIES

    x = merged.explore
    if x.strategy not in STRATEGIES:
        raise ConfigError(f"explore.strategy={x.strategy!r}: {' | '.join(STRATEGIES)}")
    from ppx.sim.explore_checks import check_explore

    check_explore(x)
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
