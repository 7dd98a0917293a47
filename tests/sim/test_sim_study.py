"""Studies on the simulator: a cell can be a simulated run, or an exploration of many
schedules (`runner: explore`) whose summary gives the fraction of schedules per verdict."""

from __future__ import annotations

import json
import sys

import pytest
from ppx_helpers import compose

from ppx.sim.explore import explore, summary_of
from ppx.study import parse_study
from ppx.study.expect import check_expectations
from ppx.study.sweep import build_commands


def test_an_explore_study_launches_the_explorer_per_cell(tmp_path):
    study = parse_study(
        {
            "question": "q",
            "runner": "explore",
            "cells": [{"engine/ordering": "blocking_lap"}],
            "base": ["explore.schedules=5"],
        },
        "s",
    )
    (cmd,) = build_commands(study, tmp_path, [])
    assert cmd[:3] == [sys.executable, "-m", "ppx.explore"]
    assert "engine/ordering=blocking_lap" in cmd and "explore.schedules=5" in cmd
    run = parse_study({"question": "q", "cells": [{"pp": 2}]}, "r")
    assert build_commands(run, tmp_path, [])[0][:3] == [sys.executable, "-m", "ppx.run"]
    with pytest.raises(ValueError, match="runner must be run or explore"):
        parse_study({"question": "q", "runner": "bogus", "cells": [{"pp": 2}]}, "b")


def test_fractions_of_schedules_are_expectations(tmp_path):
    cfg = compose(
        "+exp=micro_load",
        "pp=3",
        "engine/admission=decision",
        "logger=none",
        "engine/ordering=blocking_lap",
        "explore.strategy=pct",
        "explore.schedules=8",
    )
    s = summary_of(explore(cfg, str(tmp_path), [], echo=lambda *_: None), cfg, None)
    assert (s["frac_wedged"], s["frac_served"], s["explored"]) == (1.0, 0.0, 8)
    row = json.loads(json.dumps(s, default=str))
    import pandas as pd

    from ppx.analysis.load import summary_record

    df = pd.DataFrame([summary_record(row)])
    green = check_expectations(df, [{"frac_wedged": 1.0, "cycle_ranks": [0, 1, 2]}])
    red = check_expectations(df, [{"frac_served": 1.0}])
    assert [r.status for r in green] == ["MET"] and [r.status for r in red] != ["MET"]
