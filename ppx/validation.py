"""Every check a composed config passes before anything is spawned: merged onto the schema
(`ppx.config`), then shapes, divisibility and combinations of switches, each refused with one
line naming the key (ConfigError -> exit 2)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ppx.config import ConfigError, PPXConfig
from ppx.protocol import registry
from ppx.protocol.axis import select
from ppx.protocol.ordering import check_per_rank, flat, has_decision_step, parse_ordering
from ppx.protocol.policy import policy_of
from ppx.switch import Switch


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
    validate_switches(merged)
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
    from ppx.engine.kernels.registry import KERNELS

    if KERNELS.of(merged).interpreted_on_cpu and str(merged.device) == "cpu":
        from ppx.engine.kernels.registry import interpreter_problem

        if (why := interpreter_problem()) is not None:
            raise ConfigError(f"engine/kernels=triton on device=cpu (the interpreter): {why}")
    pms = merged.engine.kv.prefetch_ms
    if pms is not None and len(pms) != pp:
        raise ConfigError(f"engine.kv.prefetch_ms has {len(pms)} entries for pp={pp}")
    ppr = merged.engine.kv.pool_per_rank
    if ppr is not None and len(ppr) != pp:
        raise ConfigError(f"engine.kv.pool_per_rank has {len(ppr)} entries for pp={pp}")
    validate_protocol(merged)
    from ppx.engine.transport.registry import transport_spec

    try:  # the transport's own checks (ppx/engine/transport/registry.py)
        transport_spec(merged.engine.transport).validate(merged)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    validate_explore(merged)
    from ppx.engine.faults.registry import refusal as fault_refusal

    if (why := fault_refusal(merged)) is not None:  # each fault's own checks (its plug-in)
        raise ConfigError(why)
    from ppx.sim.timing import FAULT_TIMINGS

    if FAULT_TIMINGS.of(merged) and not transport_spec(merged.engine.transport).simulated:
        raise ConfigError(
            "faults.timing=choice needs engine.transport=sim: the simulator's scheduler "
            "draws when a timed effect lands"
        )
    if merged.workload.prompt_min > merged.workload.prompt_max:
        raise ConfigError("workload.prompt_min > workload.prompt_max")
    validate_text(merged)
    return merged


def switch_tables() -> list[Switch]:
    """Every switch outside the protocol package, each from the module that owns it."""
    from ppx.engine.kernels.registry import KERNELS
    from ppx.engine.model.kinds import MODELS
    from ppx.engine.transport.sim_nccl_rules import SIM_SWITCHES
    from ppx.frontend.kinds import WORKLOADS
    from ppx.launch.start_methods import START_METHODS
    from ppx.sim.scheduler import CLOCKS
    from ppx.sim.timing import FAULT_TIMINGS

    return [KERNELS, MODELS, WORKLOADS, START_METHODS, CLOCKS, FAULT_TIMINGS, *SIM_SWITCHES]


def validate_switches(merged: DictConfig) -> None:
    """A value that names no entry of its switch's table: the table's one line."""
    for switch in switch_tables():
        why = switch.refusal(select(merged, switch.key))
        if why is not None:
            raise ConfigError(why)


def validate_protocol(merged: DictConfig) -> None:
    """The ordering's steps, then every protocol switch: a value that names no design, or a
    design that cannot mean anything with the rest of the config (ppx/protocol/registry.py)."""
    o = merged.engine.ordering
    runs = registry.pass_steps()  # the pass steps designs add to the vocabulary
    extra = tuple(runs)
    try:
        parse_ordering(list(o.steps), extra)
    except ValueError as e:
        raise ConfigError(f"engine.ordering.steps: {e}") from None
    try:
        check_per_rank(dict(o.per_rank), extra)
    except ValueError as e:
        raise ConfigError(f"engine.ordering.{e}") from None
    why = registry.refusal(merged)
    if why is not None:
        raise ConfigError(why)
    policy = policy_of(merged)
    for key, steps in [("", o.steps), *((f" in per_rank.{k}", v) for k, v in o.per_rank.items())]:
        if policy.decides and not has_decision_step(list(steps), extra):
            raise ConfigError(
                f"engine/ordering={o.name} has no decision step{key}, which "
                f"engine/admission={policy.name} needs (try engine/ordering=decision_first)"
            )
        for step in flat(parse_ordering(list(steps), extra)):
            if (why := _unrun_step(merged, step.name, runs)) is not None:
                raise ConfigError(why)


def _unrun_step(merged: DictConfig, name: str, runs: dict) -> str | None:
    """A design's pass step named while its axis runs another design: nothing would run it."""
    designs = runs.get(name)
    if designs is None:
        return None
    chosen = {registry.design(merged, v.axis.key) for v in designs}
    if chosen & set(designs):
        return None
    return (
        f"engine.ordering names the pass step {name!r}, which only "
        f"{' | '.join(v.switch() for v in designs)} runs; this config chose "
        f"{', '.join(c.switch() for c in chosen)}"
    )


def validate_explore(merged: DictConfig) -> None:
    """The simulator's knobs; a replay file is checked against this very config."""
    from ppx.sim.explore_checks import check_explore

    x = merged.explore
    check_explore(merged)
    if x.fanout.ray is not None:  # the shards on a Ray cluster (ppx/sim/fanout_ray.py)
        from ppx.launch.ray_cluster import address_problem

        if (why := address_problem(str(x.fanout.ray))) is not None:
            raise ConfigError(f"explore.fanout.{why}")
    if x.schedules <= 0 or merged.sim.step_us <= 0 or merged.sim.max_steps <= 0:
        raise ConfigError("explore.schedules, sim.step_us and sim.max_steps must be positive")
    if x.replay is not None:
        from ppx.engine.transport.registry import SIM, spec_of

        if not spec_of(merged).simulated:
            raise ConfigError(f"explore.replay needs engine.transport={SIM}")
        from ppx.sim.schedule import ScheduleError, config_hash, load, recorded_for

        try:
            sch = load(x.replay)
        except ScheduleError as e:
            raise ConfigError(str(e)) from None
        try:
            same = recorded_for(sch, merged)
        except ScheduleError as e:
            raise ConfigError(f"explore.replay={x.replay}: {e}") from None
        if not same:
            from ppx.sim.report import replay_command

            raise ConfigError(
                f"explore.replay={x.replay}: the schedule was recorded for another config "
                f"(hash {sch.config_hash[:12]} != {config_hash(merged)[:12]}); replay it from "
                f"the file alone: python -m ppx.replay {x.replay}  (or: "
                f"{replay_command(sch.overrides, x.replay, sch.config_name)})"
            )


def validate_model(merged: DictConfig) -> None:
    """model=hf: the checkpoint directory fills the model's shape (ppx/engine/model/hf_config)."""
    from ppx.engine.model.kinds import MODELS

    if MODELS.of(merged).checkpoint or merged.model.path is not None:
        from ppx.engine.model.hf_checkpoint import resolve
        from ppx.engine.model.hf_config import HFError

        try:
            resolve(merged.model)
        except HFError as e:
            raise ConfigError(str(e)) from None
    if merged.oracle.sample <= 0:
        raise ConfigError(f"oracle.sample={merged.oracle.sample}: a fraction in (0, 1] or a count")


def validate_text(merged: DictConfig) -> None:
    """The workload's knobs, the tokenizer against the vocab, a prompt file's lines or a
    trace's rows (ppx/frontend/checks.py)."""
    from ppx.frontend.checks import check_workload
    from ppx.frontend.text import TextError

    try:
        check_workload(merged)
    except TextError as e:
        raise ConfigError(str(e)) from None
