"""Bad input: one clear error line naming the problem, exit 2, nothing spawned.

`BRANCHES` has one case per branch of `ppx.validation.validate()` (and `validate_explore`),
checked in-process against the message; a few of them also go through the CLI as a user
would type them, for the exit code and the "nothing spawned" half.
"""

from __future__ import annotations

import os

import pytest
from ppx_helpers import ROOT, compose

from ppx.config import ConfigError

SCHEDULE = os.path.join(ROOT, "tests", "data", "schedules", "forwarded_pool_exhausted.txt")

BRANCHES = {
    "unknown key": (["+engine.kv.bogus=1"], "engine.kv.bogus: Key 'bogus' not in 'KVCfg'"),
    "wrong type": (["pp=two"], "pp: Value 'two' of type 'str' could not be converted to Integer"),
    "not positive": (["engine.chunk_size=0"], "engine.chunk_size must be positive, got 0"),
    "layers by pp": (["model.layers=10", "pp=3"], "model.layers=10 is not divisible by pp=3"),
    "hidden by heads": (
        ["model.hidden=100"],
        "model.hidden=100 is not divisible by model.heads=24",
    ),
    "heads by kv_heads": (
        ["model.kv_heads=5"],
        "model.heads=24 is not divisible by model.kv_heads=5",
    ),
    "shard by tp": (["tp=5"], "model.heads=24 is not divisible by tp=5"),
    "shard by pp under a flip": (
        ["flip=every_2s", "pp=4", "model.kv_heads=6"],
        "model.kv_heads=6 is not divisible by pp=4 (the flip's TP phase uses all ranks)",
    ),
    "tp not 1": (["tp=2"], "tp must be 1: a hybrid pp x tp world is not built yet"),
    "dtype": (["model.dtype=int8"], "model.dtype='int8': expected float32, bfloat16 or float16"),
    "device name": (["device=tpu"], "device='tpu': expected cpu or cuda"),
    "prefetch_ms length": (
        ["engine.kv.prefetch_ms=[1,2]", "pp=3"],
        "engine.kv.prefetch_ms has 2 entries for pp=3",
    ),
    "pool_per_rank length": (
        ["engine.kv.pool_per_rank=[64,64]", "pp=3"],
        "engine.kv.pool_per_rank has 2 entries for pp=3",
    ),
    "on_refusal": (
        [
            "engine/admission=forwarded",
            "engine/ordering=decision_first",
            "engine.admission.on_refusal=retry",
        ],
        "engine.admission.on_refusal='retry': void | stop",
    ),
    "transport": (["engine.transport=mpi"], "engine.transport='mpi': gloo | nccl | sim"),
    "model checkpoint": (["model=hf", "model.path=/nonexistent"], "model.path=/nonexistent:"),
    "oracle sample": (["oracle.sample=0"], "oracle.sample=0.0: a fraction in (0, 1] or a count"),
    "text workload": (["workload=jsonl"], "workload=jsonl needs workload.path=FILE"),
    "explore strategy": (["explore.strategy=bfs"], "explore.strategy='bfs': "),
    "dfs without a bound": (["explore.strategy=dfs"], "explore.strategy=dfs needs a bound"),
    "pct depth": (
        ["explore.strategy=pct", "explore.pct.depth=0"],
        "explore.pct.depth=0: pct needs a bug depth >= 1",
    ),
    "explore counts": (["explore.schedules=0"], "explore.schedules, sim.step_us and"),
    "replay off the simulator": (
        [f"explore.replay={SCHEDULE}"],
        "explore.replay needs engine.transport=sim",
    ),
    "replay unreadable": (
        ["engine.transport=sim", "explore.replay=/nonexistent/schedule.txt"],
        "explore.replay=/nonexistent/schedule.txt: cannot read it",
    ),
    "replay of another config": (
        ["engine.transport=sim", f"explore.replay={SCHEDULE}"],
        "the schedule was recorded for another config",
    ),
    "width_check": (["engine.width_check=cols"], "engine.width_check='cols': fingerprint | rows"),
    "guard name": (["engine.guard.name=floor"], "engine.guard.name='floor': off | rid | prefix"),
    "fault kind": (
        ["faults=delay_output", "faults.delay.kind=outptu"],
        "faults.delay.kind='outptu': chain | proxy | output | decision | lap | tp",
    ),
    "corrupting rank": (
        ["faults=corrupt_token", "faults.corrupt.rank=0"],
        "faults.corrupt.rank=0: tokens are sampled on the last rank",
    ),
    "prompt bounds": (
        ["workload.prompt_min=30", "workload.prompt_max=10"],
        "workload.prompt_min > workload.prompt_max",
    ),
    "ordering step": (
        ["engine.ordering.steps=[chain,schedule,lanuch,output,flush]"],
        "engine.ordering.steps: unknown ordering step 'lanuch'",
    ),
    "policy without a decision step": (
        ["engine/admission=decision", "engine/ordering=upstream"],
        "engine/ordering=upstream has no decision step, which engine/admission=decision needs",
    ),
    # protocol switches a policy ignores, or that mean nothing together (issue 14)
    "on_refusal ignored by decision": (
        [
            "engine/admission=decision",
            "engine/ordering=decision_first",
            "engine.admission.on_refusal=stop",
        ],
        "engine.admission.on_refusal=stop is ignored by engine/admission=decision",
    ),
    "on_refusal ignored by rank_local": (
        ["engine.admission.on_refusal=void"],
        "ignored by engine/admission=rank_local",
    ),
    "prefix_clear without the prefix guard": (
        ["engine/guard=rid", "engine.guard.prefix_clear=never"],
        "needs engine/guard=prefix",
    ),
    "guard miss": (["engine.guard.miss=none"], "engine.guard.miss='none': sentinel | zero"),
    "told_scope without flips": (
        [
            "engine/admission=decision",
            "engine/ordering=decision_first",
            "engine.admission.told_scope=promise",
        ],
        "told_scope=promise means nothing without flips",
    ),
    # sgl-project#1061b: the epoch's clock at a cutover, and the retract clear
    "epoch_advance value": (
        ["flip=every_40_passes", "flip.epoch_advance=never"],
        "flip.epoch_advance='never': release | completion",
    ),
    "epoch_advance=completion without flips": (
        ["flip.epoch_advance=completion"],
        "flip.epoch_advance=completion means nothing without flips",
    ),
    "epoch_advance=completion with no told row to read it": (
        ["flip=every_40_passes", "flip.epoch_advance=completion"],
        "and engine.admission.told_scope=pass stamps none",
    ),
    "epoch_retract without flips": (
        [
            "engine/admission=decision",
            "engine/ordering=decision_first",
            "engine.admission.told_scope=epoch_retract",
        ],
        "told_scope=epoch_retract means nothing without flips",
    ),
    "epoch_retract on rank_local": (
        ["flip=every_40_passes", "engine.admission.told_scope=epoch_retract"],
        "told_scope=epoch_retract needs a decision to stamp",
    ),
    "geometry=rederive on forwarded": (
        [
            "engine/admission=forwarded",
            "engine/ordering=decision_first",
            "engine.admission.geometry=rederive",
        ],
        "executes rank 0's lengths by definition",
    ),
    "row_authority that voids": (
        [
            "engine/admission=row_authority",
            "engine/ordering=decision_first",
            "engine.admission.on_refusal=void",
        ],
        "row_authority never voids",
    ),
    # sgl-project#798: a slot-blind reconcile needs two slots in flight to mean anything
    "slot-blind reconcile with one slot": (
        [
            "pp=1",
            "engine/admission=decision",
            "engine/ordering=decision_first",
            "engine.admission.reconcile=scheduler",
        ],
        "engine.admission.reconcile=scheduler needs two or more slots in flight: pp=1",
    ),
    "reconcile value": (
        ["engine/admission=decision", "engine.admission.reconcile=slots"],
        "engine.admission.reconcile='slots': running | slot | scheduler",
    ),
    "void value": (
        ["engine/admission=decision", "engine.admission.void=drop"],
        "engine.admission.void='drop': requeue | keep",
    ),
    "void=keep on rank_local": (
        ["engine.admission.void=keep"],
        "engine.admission.void=keep means nothing: engine/admission=rank_local",
    ),
    "slot-blind reconcile on row_authority": (
        [
            "engine/admission=row_authority",
            "engine/ordering=decision_first",
            "engine.admission.reconcile=scheduler",
        ],
        "engine.admission.reconcile=scheduler means nothing: engine/admission=row_authority",
    ),
    "row_authority with a guard": (
        ["engine/admission=row_authority", "engine/ordering=decision_first", "engine/guard=rid"],
        "learns from retractions",
    ),
    # the output ring's switches (ppx/engine/ring.py)
    "output_recv=occupancy without an intermediate hop": (
        ["pp=2", "engine.ordering.output_recv=occupancy"],
        "engine.ordering.output_recv=occupancy needs an intermediate hop (pp >= 3)",
    ),
    "output_recv value": (
        ["engine.ordering.output_recv=resident"],
        "engine.ordering.output_recv='resident': relayed | occupancy",
    ),
    "void_relay value": (
        ["engine.ordering.void_relay=none"],
        "engine.ordering.void_relay='none': ring | first_retracting | downstream",
    ),
    "void_relay where nothing voids": (
        ["engine.ordering.void_relay=first_retracting"],
        "engine/admission=rank_local at pp=3 never voids one",
    ),
    "void_relay under forwarded on_refusal=stop": (
        [
            "engine/admission=forwarded",
            "engine/ordering=decision_first",
            "engine.admission.on_refusal=stop",
            "engine.ordering.void_relay=downstream",
        ],
        "engine.ordering.void_relay=downstream needs a pipeline that voids passes",
    ),
}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("overrides,message", BRANCHES.values(), ids=BRANCHES.keys())
def test_every_validate_branch_names_the_problem(overrides, message):
    with pytest.raises(ConfigError) as e:
        compose(*overrides)
    assert message in str(e.value)
    assert "\n" not in str(e.value)  # one line


@pytest.mark.parametrize(
    "overrides,message,cuda_needed",
    [
        (["device=cuda"], "device=cuda: CUDA is not available on this machine", True),
        (["engine.transport=nccl"], "engine.transport=nccl needs device=cuda", False),
    ],
)
def test_the_cuda_branches(overrides, message, cuda_needed):
    """Which branch answers depends on the machine: without CUDA both are errors; with it,
    `device=cuda` is valid and nccl still needs device=cuda."""
    if cuda_needed and _cuda():
        assert compose(*overrides).device == "cuda"
        return
    with pytest.raises(ConfigError, match=message):
        compose(*overrides)


# (overrides, exit code, needle): Hydra itself refuses an unknown key or group option before
# ppx runs (its own multi-line message, exit 1); everything else is ppx's one line, exit 2
CLI = [
    (["engine.chunk_sise=8"], 1, "chunk_sise"),
    (["engine/admission=decison"], 1, "decison"),
    (["model.layers=10", "pp=3"], 2, "model.layers=10 is not divisible by pp=3"),
    (
        ["pp=1", "engine/admission=decision", "engine.admission.reconcile=scheduler"],
        2,
        "engine.admission.reconcile=scheduler needs two or more slots in flight: pp=1 runs one "
        "slot, where the scheduler-wide pointer IS the slot's (sgl-project#798)",
    ),
    (
        ["pp=2", "engine.ordering.output_recv=occupancy"],
        2,
        "engine.ordering.output_recv=occupancy needs an intermediate hop (pp >= 3): at pp=2 "
        "every output receive is rank 0's or the last rank's",
    ),
]


@pytest.mark.parametrize("overrides,code,needle", CLI)
def test_bad_config_on_the_cli_exits_and_spawns_nothing(ppx_run, overrides, code, needle):
    proc, summary, run_dir = ppx_run(*overrides)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr, proc.stderr
    if code == 2:
        assert proc.stderr.strip() == f"ppx: config error: {needle}"
    assert summary is None
    assert not os.path.exists(os.path.join(run_dir, "ranks")), "a rank was spawned for a bad config"


def test_a_good_config_comes_back_merged_onto_the_schema():
    from omegaconf import OmegaConf

    from ppx.config import WatchCfg
    from ppx.validation import validate

    steps = ["chain", "schedule", "launch", "output", "flush"]
    cfg = validate(OmegaConf.create({"pp": 4, "engine": {"ordering": {"steps": steps}}}))
    assert cfg.pp == 4 and list(cfg.engine.ordering.steps) == steps  # the overrides kept
    assert cfg.watch.stall_s == WatchCfg().stall_s  # what was not given: the schema's default
