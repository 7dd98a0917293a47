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


def planted_search(found, fails, other=lambda c: False):
    """A ScenarioSearch of the decision design whose scenario runs are a planted bug: a
    scenario fails with "another failure" where `other` says so (checked first), with "the
    failure" where `fails` does; `found` is its find, and the shrink's clock has started."""
    import io
    import time

    from ppx.sim.runner import Result
    from ppx.sim.scenarios import Find, ScenarioSearch

    s = ScenarioSearch(
        explorer_cfg("pp=3", "engine/admission=decision", "engine/ordering=decision_first"),
        io.StringIO(),
    )

    def result(reason: str) -> Result:
        return Result({"verdict": "stopped", "reason": reason, "cycle": None}, [])

    def run_scenario(c, record: bool):
        if other(c):
            return {}, Find(c, result("another failure"), "random", 0)
        return {}, Find(c, result("the failure"), "random", 0) if fails(c) else None

    s.run_scenario = run_scenario
    s.first = s.best = Find(found, result("the failure"), "random", 0)
    s.shrink.t0 = time.time()
    return s
