"""The bug zoo of bench_explore.py: the red cells of experiments/incident_gallery.yaml whose
failure is a verdict a schedule can end with, plus a corrupted token, each explored until
the first schedule ends with the red verdict its expectation names."""

from __future__ import annotations

import time

from ppx.sim.runner import Runner
from ppx.sim.shard import Plan, run_plan
from ppx.study.catalog import load_study

FAILURES = {"wedged", "stopped", "livelocked", "mismatch", "crashed", "dead_peer", "timeout"}
EXTRA = [  # faults the oracle must see, not in the gallery: a corrupt sampled token
    ("corrupt_token", ["pp=3", "engine/admission=decision", "engine/ordering=decision_first",
                       "faults=corrupt_token", "logger=none", "engine.transport=sim"],
     {"mismatch"}),
]  # fmt: skip


def red_cells() -> list[tuple[str, list[str], set[str]]]:
    """(incident, overrides, the red verdicts) for every red cell expected to fail."""
    study = load_study("incident_gallery")
    out = []
    for cell, label in zip(study.cells, study.labels, strict=True):
        if label.get("arm") != "red":
            continue
        want: set[str] = set()
        for e in study.expect:
            when = e.get("when") or {}
            if when.get("incident") == label["incident"] and when.get("arm") == "red":
                want |= set(e.get("verdict_in") or [e["verdict"]] if "verdict" in e or
                            "verdict_in" in e else [])  # fmt: skip
        want &= FAILURES
        if not want:
            continue  # a red arm that serves (silently): nothing for a schedule to end with
        # the cell as it runs, less its model (the zoo runs the hash model) and its schedule
        # seed (every strategy starts from its own first schedule)
        keep = {k: v for k, v in cell.items() if k != "model" and not k.startswith("explore.")}
        ov = [*study.base, *(f"{k}={v}" for k, v in keep.items())]
        out.append((label["incident"], ov, want))
    return out + EXTRA


def first_find(cfg, want: set[str], cap: int) -> tuple[int, float] | None:
    """Schedules run and wall seconds (runner built, nothing shrunk) until the first one
    ends with a verdict in `want`; None if none of `cap` does."""
    t0 = time.perf_counter()
    runner = Runner(cfg)
    n = 0
    for _, _, _, res in run_plan(Plan(cfg, 0, 1, runner), runner):
        n += 1
        if res.verdict in want:
            return n, time.perf_counter() - t0
        if n >= cap:
            break
    return None


def explorer_compose(*overrides: str):
    """The config `python -m ppx.explore` composes (conf/explorer.yaml)."""
    import os

    from hydra import compose, initialize_config_dir

    from ppx.validation import validate

    conf = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
    with initialize_config_dir(config_dir=conf, version_base=None):
        cfg = compose(config_name="explorer", overrides=["engine.transport=sim", *overrides])
    return validate(cfg)
