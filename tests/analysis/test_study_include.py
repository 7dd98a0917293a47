"""Studies built on another study (ppx/study/include.py): cells_from, variants, expect_from,
and the `same_verdict_as` twin expectation they are checked with."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from ppx.study.catalog import load_study
from ppx.study.expect import check_expectations
from ppx.study.include import resolve
from ppx.study.spec import parse_study

GALLERY = {
    "question": "g",
    "base": ["logger=none", "workload.max_new=6"],
    "cells": [
        {"pp": 3, "engine/ordering": "a", "label": {"incident": "x", "arm": "red"}},
        {
            "pp": 3,
            "engine/ordering": "b",
            "workload.max_new": 8,
            "label": {"incident": "x", "arm": "green"},
        },
    ],
    "expect": [
        {"name": "x red wedges", "when": {"incident": "x", "arm": "red"}, "verdict": "wedged"}
    ],
}
STUDY = {
    "question": "q",
    "cells_from": "gallery",
    "cells": [{"pp": 2, "label": {"incident": "own", "arm": "pp=2"}}],
    "variants": [{"label": {"wire": "g"}, "w": "g"}, {"label": {"wire": "n"}, "w": "n"}],
    "expect_from": {"study": "gallery", "when": [{"wire": "g"}, {"wire": "n"}]},
    "expect": [{"name": "twins", "when": {"wire": "n"}, "same_verdict_as": {"wire": "g"}}],
}


@pytest.fixture
def experiments(tmp_path):
    (tmp_path / "gallery.yaml").write_text(yaml.safe_dump(GALLERY))
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(STUDY))
    return tmp_path


def test_cells_of_another_study_under_every_variant(experiments):
    s = load_study("study", experiments)
    assert len(s.cells) == 3 * 2
    assert s.cells[0] == {
        "logger": "none",
        "workload.max_new": "6",  # the gallery's base, folded in
        "pp": "3",
        "engine/ordering": "a",
        "w": "g",
    }
    assert s.cells[2]["workload.max_new"] == "8"  # the cell's own value wins over the base
    assert s.labels[3] == {"incident": "x", "arm": "green", "wire": "n"}
    assert s.labels[5] == {"incident": "own", "arm": "pp=2", "wire": "n"}


def test_expectations_of_another_study_narrowed_per_variant(experiments):
    s = load_study("study", experiments)
    names = [e["name"] for e in s.expect]
    assert names == ["twins", "[wire=g] x red wedges", "[wire=n] x red wedges"]
    assert s.expect[2]["when"] == {"incident": "x", "arm": "red", "wire": "n"}


def test_a_study_without_the_keys_is_unchanged():
    assert resolve(GALLERY) is GALLERY
    assert parse_study(resolve(GALLERY), "g").cells[0]["pp"] == "3"


def runs(verdicts: dict[tuple[str, str], str]) -> pd.DataFrame:
    rows = [
        {"incident": i, "arm": "red", "wire": w, "verdict": v, "run_dir": f"{i}-{w}", "run_id": w}
        for (i, w), v in verdicts.items()
    ]
    return pd.DataFrame(rows)


TWINS = [{"name": "t", "when": {"wire": "n"}, "same_verdict_as": {"wire": "g"}}]


def test_same_verdict_as_pairs_each_run_with_its_twin():
    df = runs(
        {("x", "g"): "wedged", ("x", "n"): "wedged", ("y", "g"): "served", ("y", "n"): "served"}
    )
    (r,) = check_expectations(df, TWINS, ["incident", "arm", "wire"])
    assert r.met and "2/2 runs end as their twin" in r.detail


def test_same_verdict_as_fails_on_a_different_verdict_or_a_missing_twin():
    df = runs({("x", "g"): "served", ("x", "n"): "wedged", ("y", "n"): "served"})
    (r,) = check_expectations(df, TWINS, ["incident", "arm", "wire"])
    assert not r.met
    assert "incident=x arm=red: wedged vs served" in r.detail
    assert "incident=y arm=red: served vs no twin" in r.detail
    (r,) = check_expectations(df, TWINS, ["wire"])  # nothing left to pair twins by
    assert not r.met and "needs cell labels" in r.detail
