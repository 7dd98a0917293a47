"""Helpers shared by the engine tests (imported by name; conftest files are not modules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pids_alive(run_dir: str) -> list[int]:
    """Rank pids recorded on the status board that still exist (orphans)."""
    import numpy as np

    path = os.path.join(run_dir, "ranks", "board.bin")
    if not os.path.exists(path):
        return []
    from ppx.engine.board import RANK_BLOCK, F

    arr = np.fromfile(path, dtype=np.int64).reshape(-1, RANK_BLOCK)
    alive = []
    for pid in arr[:, F.PID].tolist():
        if pid and os.path.exists(f"/proc/{pid}"):
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] != "Z":
                    alive.append(pid)
    return alive


def wait_serving(run_dir: str, world: int, proc=None, deadline_s: float = 180) -> None:
    """Until every rank has booted and rank 0 has seen a token (read off the status board):
    a signal sent after this lands in a running engine, not in its start-up."""
    import time

    import numpy as np

    from ppx.engine.board import RANK_BLOCK, F, State

    path = os.path.join(run_dir, "ranks", "board.bin")
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"ppx.run exited ({proc.returncode}) before serving")
        if os.path.exists(path) and os.path.getsize(path) >= world * RANK_BLOCK * 8:
            arr = np.fromfile(path, dtype=np.int64)[: world * RANK_BLOCK].reshape(world, -1)
            if (arr[:, F.STATE] != State.INIT).all() and arr[0, F.TOKENS] > 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the engine in {run_dir} was not serving after {deadline_s}s")


def run_ppx(
    run_dir, *overrides: str, timeout: float = 240, logger: str = "none", env: dict | None = None
):
    """Run `python -m ppx.run` as a user would; returns (CompletedProcess, summary or None)."""
    args = [sys.executable, "-m", "ppx.run", f"hydra.run.dir={run_dir}", *overrides]
    if logger:
        args.append(f"logger={logger}")
    e = dict(os.environ, WANDB_MODE="offline", **(env or {}))
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=e)
    path = os.path.join(run_dir, "summary.json")
    summary = json.load(open(path)) if os.path.exists(path) else None
    return proc, summary


def compose(*overrides: str):
    """The validated config `python -m ppx.run` would build for these overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ppx.validation import validate

    with initialize_config_dir(config_dir=os.path.join(ROOT, "conf"), version_base=None):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
    return validate(cfg)


def workload_prompts(*overrides: str) -> list[tuple]:
    """The (prompt, max_new) of every request the composed workload submits."""
    from ppx.frontend.make import make_workload

    wl = make_workload(compose(*overrides))
    return [(tuple(r.prompt), r.max_new) for r in (wl.request(i) for i in range(wl.count))]


def one_row_trace(tmp_path) -> list[str]:
    """The overrides of workload=trace over a one-row Azure CSV written under `tmp_path`."""
    trace = tmp_path / "azure.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,37,4\n")
    return ["workload=trace", "workload.trace.format=azure", f"workload.path={trace}"]


def on_gloo(overrides: list[str]) -> list[str]:
    """A sim test's overrides, run on real gloo processes instead."""
    return [o for o in overrides if o != "engine.transport=sim"] + ["engine.transport=gloo"]


GLOO_WATCH = ["watch.max_run_s=60", "watch.stall_s=10"]  # a red gloo arm's deadline


def assert_refused(overrides: list[str], message: str) -> None:
    """Validation refuses `overrides` before anything is spawned, in one line naming why."""
    import pytest

    from ppx.config import ConfigError

    with pytest.raises(ConfigError) as e:
        compose(*overrides)
    assert message in str(e.value) and "\n" not in str(e.value)


def run_inproc(run_dir: str, *overrides: str) -> dict:
    """Boot the real multi-process engine from this process (no Hydra CLI start-up cost):
    same supervisor, ranks, gloo, oracle and store as `python -m ppx.run`."""
    from ppx.run import execute

    cfg = compose("logger=none", *overrides)
    os.makedirs(run_dir, exist_ok=True)
    exp = next((o.split("=", 1)[1] for o in overrides if o.startswith("+exp=")), None)
    summary = execute(cfg, run_dir, exp, [o for o in overrides if o != "logger=none"])
    assert pids_alive(run_dir) == [], "a rank process outlived its run"
    return summary


def shape(cycle: str) -> str:
    """The cycle's ranks and channel operations; the slot is wherever the first request
    landed, which depends on when it arrived."""
    import re

    return re.sub(r" slot=\d+", "", cycle)


def outputs(run_dir: str) -> dict[int, list[int]]:
    import pandas as pd

    df = pd.read_parquet(os.path.join(run_dir, "requests.parquet"))
    return {int(r): list(ids) for r, ids in zip(df["rid"], df["output_ids"]) if len(ids)}


# Family A of experiments/admission_matrix.yaml: rank 1's 400-token pool evicts shared
# prefixes rank 0 keeps and computes them again later (an honest, healing disagreement).
SKEW_400 = [
    "faults=pool_skew",
    "faults.pool.tokens=400",
    "workload.num_prefixes=4",
    "workload.num_requests=24",
    "workload.concurrency=4",
    "workload.max_new=8",
    "engine.liveness.livelock_passes=32",
]

# two short shared prefixes, one request at a time: a small pool cannot keep both
# #791's forwarded slice 1 behind a row-count-only width check: rank 1 walks its own queue
# (newest first, faults.lifo.rank), so under engine.admission.batch_order=queue it runs rank 0's
# rids in another order at an equal width and only the oracle sees it
QUEUE_ORDER = [
    "pp=2",
    "engine/ordering=decision_first",
    "engine/admission=forwarded",
    "workload.num_requests=8",
    "workload.concurrency=4",
    "faults.lifo.rank=1",
    "engine.width_check=rows",
]
SHORT_PREFIXES = [
    "workload.num_prefixes=2",
    "workload.prefix_len=24",
    "workload.num_requests=12",
    "workload.concurrency=1",
    "workload.max_new=8",
    "engine.liveness.livelock_passes=24",
]
# #1175's host-tier prefetch: every rank's 64-token pool evicts the two short prefixes to its
# host tier and a forwarded group reloads them (add pp and engine.kv.prefetch_ms per rank)
HOST_PREFETCH = [
    "engine/ordering=decision_first",
    "engine/admission=forwarded",
    "engine.admission.on_refusal=stop",
    "faults=host_prefetch",
    "faults.pool.tokens=64",
    "engine.kv.pool_tokens=64",
    *SHORT_PREFIXES,
    "engine.kv.host_tier=true",
]
# rank 1's pool is too small to keep them; rank 0 keeps both, so rank 0 keeps telling a
# prefix rank 1 no longer has (the README's `D`, family B of the admission matrix)
SHORT_SKEW = ["faults=pool_skew", "faults.pool.tokens=64", *SHORT_PREFIXES]

# rank 0 decides on the simulator, two ranks, the micro model: the base of the flip tests
SIM_DECISION = [
    "pp=2",
    "model=micro",
    "engine.transport=sim",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "engine/guard=rid",
]


def typed_cfg(settings: dict | None = None):
    """The typed config a rank reads (the schema's defaults), with dotted keys set."""
    from ppx.config import PPXConfig

    cfg = PPXConfig()
    for key, value in (settings or {}).items():
        *path, last = key.split(".")
        node = cfg
        for part in path:
            node = getattr(node, part)
        setattr(node, last, value)
    return cfg


def design(key: str, value, settings: dict | None = None):
    """An instance of the design `value` of axis `key` (ppx/protocol/registry.py), built from
    a typed config with `key` and `settings` set: how a rank builds it."""
    from ppx.protocol.registry import AXES

    return AXES[key][1][value](typed_cfg({key: value, **(settings or {})}))


def make_guard(
    name: str,
    defer_cap: int,
    miss: str = "sentinel",
    prefix_clear: str = "serve",
    defer_streak: str = "refusal",
    on_escalate=None,
    unit: str = "rounds",
):
    """Rank 0's guard composed of these guard designs, as the decision policy composes it."""
    from ppx.protocol.guard.defer_streak import DeferStreak
    from ppx.protocol.guard.floors import Floors
    from ppx.protocol.guard.guard import Guard
    from ppx.protocol.guard.prefix_clear import PrefixClear
    from ppx.protocol.guard.unit import GuardUnit
    from ppx.protocol.registry import Protocol

    proto = Protocol(
        typed_cfg(
            {
                "engine.guard.name": name,
                "engine.guard.miss": miss,
                "engine.guard.prefix_clear": prefix_clear,
                "engine.guard.defer_streak": defer_streak,
                "engine.guard.unit": unit,
            }
        )
    )
    return Guard(
        proto.of(Floors),
        proto.of(DeferStreak),
        proto.of(PrefixClear),
        defer_cap,
        on_escalate,
        unit=proto.of(GuardUnit),
    )


class Clock:
    """A settable clock for a host tier: a test moves `now` to land or withhold a load."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def serve_once(cache, rid: int, tokens: list[int]) -> None:
    """Admit, compute, commit and release one request, leaving its prefix in `cache`'s tree."""
    from ppx.core import Req

    r = Req(rid, tokens, max_new=1)
    cache.admit(r, cache.tree_match(tokens), need=len(tokens) + 1)
    cache.extend(r, r.seq_len - r.computed)
    cache.commit(r)
    r.output.append(0)
    cache.release(r)


def upstream_rule(ctx, second: str = "mint"):
    """The upstream rule (ppx/engine/admission/prefill.py) over a bare context holding a
    scheduler: rank 0's own match, unclamped; `second` the #959 design (`mint`: nothing asks)."""
    from ppx.engine.admission.prefill import LocalPrefill, Offer

    return LocalPrefill(ctx, Offer(ctx), design("engine.admission.second_continuation", second))


def bare_steps(ctx=None, width=None):
    """The pass steps with no collaborators but a context and a width check: what a unit test
    of one step (the proxy's width check) needs."""
    from types import SimpleNamespace

    from ppx.engine.loop import PassSteps

    seams = SimpleNamespace(admission=None, returns=None)
    return PassSteps(ctx, [], seams, None, None, width, None, None)  # type: ignore[arg-type]
