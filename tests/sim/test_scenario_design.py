"""A scenario exploration with no design named searches DEFAULT_DESIGN (the reference log's
converged design, in which every mechanism group can fire); a named design, on the command
line or by a preset, is searched as named (ppx/sim/scenario_design.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from explore_helpers import explorer_cfg
from ppx_helpers import ROOT

from ppx.sim.scenario_design import DEFAULT_DESIGN, default_design, design_named

DESIGN = ["engine/admission=decision", "engine/ordering=decision_first", "engine/guard=rid"]
assert list(DEFAULT_DESIGN) == DESIGN


def test_the_design_is_open_only_where_nothing_names_one():
    run_default = explorer_cfg()
    open_ = explorer_cfg("explore.scenarios=5")
    assert design_named(open_, ["pp=3", "explore.scenarios=5"], run_default) is None
    assert default_design(open_, ["explore.scenarios=5"], run_default) == DESIGN
    # named on the command line, even at the run's default: the researcher's design is kept
    for named in ("engine/admission=rank_local", "engine/guard=off", "engine.ordering.name=x"):
        assert design_named(open_, [named], run_default) == named.split("=")[0]
        assert default_design(open_, [named], run_default) == []
    # named by an experiment preset: the composed value differs from the run's default
    preset = explorer_cfg("engine/admission=decision", "engine/ordering=decision_first")
    assert design_named(preset, [], run_default) == "engine/admission=decision"
    # one scenario (a schedule exploration) is the researcher's
    assert default_design(explorer_cfg(), [], run_default) == []


def _explore(tmp_path, *overrides: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "ex"
    args = [sys.executable, "-m", "ppx.explore", f"hydra.run.dir={out}", "pp=3", "logger=none"]
    args += ["explore.scenarios=2", "explore.scenario_schedules=1", *overrides]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc, json.loads((out / "summary.json").read_text())


def test_an_unnamed_design_explores_the_default_and_says_so(tmp_path):
    proc, s = _explore(tmp_path / "open")
    assert s["design_default"] == DESIGN
    assert "no design named: exploring the default design" in proc.stdout
    assert s["mechanisms_absent"] == {}  # the decision design has every group
    # red arm: the run's own default (rank-local admission), named, keeps four groups absent
    proc, s = _explore(tmp_path / "named", "engine/admission=rank_local")
    assert s["design_default"] == [] and "no design named" not in proc.stdout
    assert {"voids", "floors_learned", "defers", "escalations"} <= set(s["mechanisms_absent"])
