"""Study cells with labels (names that are not overrides), list values and twin cells."""

from __future__ import annotations

import pandas as pd

from ppx.study.report import add_label_columns
from ppx.study.spec import fmt_value, parse_study
from ppx.study.sweep import build_commands, cell_of

STUDY = {
    "question": "q",
    "base": ["logger=none"],
    "cells": [
        {"engine/ordering": "flush_before_decision", "label": {"incident": "x", "arm": "red"}},
        {
            "engine/ordering": "flush_before_decision",
            "engine.readiness": True,
            "label": {"incident": "x", "arm": "green"},
        },
        {"engine.kv.prefetch_ms": [2, 300]},
    ],
    "columns": ["incident", "arm"],
}


def test_labels_never_reach_the_command_line_and_lists_stay_lists(tmp_path):
    s = parse_study(STUDY, "t")
    assert s.labels[0] == {"incident": "x", "arm": "red"} and s.labels[2] == {}
    cmds = build_commands(s, tmp_path, [])
    assert not any(a.startswith(("label", "incident", "arm")) for c in cmds for a in c)
    assert "engine.kv.prefetch_ms=[2,300]" in cmds[2]
    assert fmt_value("a,b") == "'a,b'"  # a plain string with a comma stays one value


def test_a_run_belongs_to_the_most_specific_cell_it_satisfies():
    s = parse_study(STUDY, "t")
    # Hydra's multirun records booleans as True/False
    green = {"engine/ordering": "flush_before_decision", "engine.readiness": "True"}
    red = {"engine/ordering": "flush_before_decision"}
    assert cell_of(green, s.cells) == 1 and cell_of(red, s.cells) == 0
    df = pd.DataFrame({"overrides": [red, green]})
    out = add_label_columns(df, s.cells, s.labels)
    assert list(out["arm"]) == ["red", "green"] and list(out["incident"]) == ["x", "x"]
