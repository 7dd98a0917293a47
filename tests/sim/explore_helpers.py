"""Helpers of the explorer tests: the explorer's own config (conf/explorer.yaml), explored
in-process, and a saved schedule replayed as `python -m ppx.run --config-name explorer` would."""

from __future__ import annotations

import os

from ppx_helpers import ROOT

SMALL_DFS = ["pp=3", "engine/admission=decision", "explore.strategy=dfs", "explore.clock=idle"]


def explorer_cfg(*overrides: str):
    """The validated config `python -m ppx.explore` builds for these overrides."""
    from hydra import compose, initialize_config_dir

    from ppx.validation import validate

    with initialize_config_dir(config_dir=os.path.join(ROOT, "conf"), version_base=None):
        cfg = compose(config_name="explorer", overrides=["engine.transport=sim", *overrides])
    return validate(cfg)


def explore_in(out_dir, *overrides: str):
    from ppx.sim.explore import explore

    cfg = explorer_cfg(*overrides)
    return explore(cfg, str(out_dir), list(overrides), echo=lambda *_: None, config_name="explorer")


def outcomes(ex) -> set[tuple]:
    """What tells two schedules' ends apart: verdict, cycle, steps, virtual time, tokens."""
    df = ex.table
    return set(zip(df.verdict, df.cycle.fillna(""), df.steps, df.virtual_s, df.tokens))


def replay(run_dir, overrides: list[str], path: str) -> dict:
    """A saved schedule as a full run (run store, oracle), through ppx.run's execute."""
    from ppx.run import execute

    cfg = explorer_cfg("logger=none", *overrides, f"explore.replay={path}")
    os.makedirs(run_dir, exist_ok=True)
    return execute(cfg, str(run_dir), None, list(overrides))


def whole_prompt_match(monkeypatch) -> None:
    """zoo `match_whole_prompt`: the radix match may cover the whole prompt (KVCache.match
    leaves none of it to compute)."""
    from ppx.engine.cache.kv import KVCache

    monkeypatch.setattr(
        KVCache, "match", lambda c, tokens, may_load=True: c._capped(len(c.tree.match(tokens)[0]))
    )
