"""The study runner: spec parsing, command lines, expectation checks (green and red arms),
the written report, and the whole CLI driving a fake engine in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from fake_runs import MATRIX

import ppx.analysis as pa
from ppx.study import check_expectations, evaluate, parse_study
from ppx.study.cli import main
from ppx.study.sweep import build_commands, launcher_overrides

HERE = Path(__file__).resolve().parent

GREEN = [
    {
        "when": {"engine/ordering": "flush_before_decision"},
        "verdict": "wedged",
        "cycle_ranks": [0, 1],
        "cycle_kinds": ["chain", "decision"],
    },
    {
        "when": {"engine/ordering": "decision_first"},
        "verdict_in": ["served"],
        "oracle_mismatches": 0,
        "voids": ">0",
        "submitted": ">=8",
    },
    {
        "compare": "voids",
        "lhs": {"engine/guard": "prefix"},
        "rhs": {"engine/guard": "rid"},
        "op": "<",
        "when": {"engine/ordering": "decision_first"},
    },
    {
        "when": {"pp": 2, "guard": ["rid", "prefix"], "engine/ordering": "decision_first"},
        "lost": 0,
        "verdict": "served",
        "engine/admission": ["rank_local", "decision"],
    },
]
RED = [
    {"when": {"engine/ordering": "flush_before_decision"}, "verdict": "served"},
    {"when": {"engine/ordering": "flush_before_decision"}, "cycle_ranks": [0, 1, 2]},
    {"when": {"engine/ordering": "no_such_ordering"}, "verdict": "served"},
    {
        "compare": "voids",
        "lhs": {"engine/guard": "rid"},
        "rhs": {"engine/guard": "prefix"},
        "op": "<",
    },
    {"when": {"engine/ordering": "decision_first"}, "retractions": ">0"},
    {"when": {}, "no_such_metric": 1},
]


def _study(expect, **extra) -> object:
    data = {
        "question": "Does flushing first wedge?",
        "base": ["+exp=smoke", "pp=2"],
        "sweep": MATRIX,
        "expect": expect,
        **extra,
    }
    return parse_study(data, name="ordering_matrix")


def test_spec_expand_and_commands(tmp_path) -> None:
    study = _study(GREEN)
    cells = study.expand()
    assert len(cells) == 8 and cells[0] == {
        "engine/admission": "rank_local",
        "engine/guard": "rid",
        "engine/ordering": "decision_first",
    }
    assert study.launcher == {"name": "joblib", "n_jobs": 2}
    (cmd,) = build_commands(study, tmp_path, ["seed=3"])
    assert cmd[1:4] == ["-m", "ppx.run", "-m"]
    assert "hydra/launcher=joblib" in cmd and "hydra.launcher.n_jobs=2" in cmd
    assert f"hydra.sweep.dir={tmp_path}" in cmd and "++logger.group=ordering_matrix" in cmd
    assert "engine/guard=rid,prefix" in cmd and cmd.index("+exp=smoke") < cmd.index("seed=3")
    explicit = parse_study(
        {
            "question": "q",
            "cells": [["flip=off", "pp=2"], {"flip": "a,b"}],
            "launcher": {"name": "submitit_slurm", "partition": "gpu"},
        },
        "x",
    )
    cmds = build_commands(explicit, tmp_path, [])
    assert len(cmds) == 2 and "hydra.sweep.subdir=1" in cmds[1]
    assert "flip='a,b'" in cmds[1] and "hydra.launcher.partition=gpu" in cmds[0]
    assert launcher_overrides({"name": "ray", "ray": {"init": {"address": "auto"}}}) == [
        "hydra/launcher=ray",
        "hydra.launcher.ray.init.address=auto",
    ]
    with pytest.raises(ValueError, match="unknown keys"):
        parse_study({"question": "q", "sweeps": {}}, "typo")
    with pytest.raises(ValueError, match="question"):
        parse_study({"sweep": {}}, "noq")


def test_expectations_green(matrix_root) -> None:
    results = check_expectations(pa.load_runs(matrix_root), GREEN)
    assert [r.met for r in results] == [True] * len(GREEN), [r.detail for r in results]
    assert "mean voids" in results[2].detail


def test_expectations_red(matrix_root) -> None:
    results = check_expectations(pa.load_runs(matrix_root), RED)
    assert [r.met for r in results] == [False] * len(RED)
    assert "verdict=wedged" in results[0].detail and len(results[0].failing) == 4
    assert "cycle ranks=[0, 1]" in results[1].detail
    assert "no run matches" in results[2].detail
    assert "is False" in results[3].detail
    assert "no column 'no_such_metric'" in results[5].detail


def test_evaluate_writes_report_and_exit_codes(matrix_root, tmp_path) -> None:
    ok = evaluate(_study(GREEN), matrix_root, tmp_path / "green", echo=lambda _: None)
    assert ok.exit_code == 0 and not ok.missing
    for name in (
        "table.md",
        "table.csv",
        "expectations.md",
        "verdict_grid.png",
        "bars.png",
        "latency.png",
    ):
        assert (tmp_path / "green" / name).stat().st_size > 0, name
    assert len(ok.table) == 8 and list(ok.table.columns[:4]) == [*MATRIX, "verdict"]
    assert "| engine/admission |" in (tmp_path / "green" / "table.md").read_text()
    assert (tmp_path / "green" / "expectations.md").read_text().count("**MET**") == len(GREEN)
    bad = evaluate(
        _study(GREEN + RED[:1]), matrix_root, tmp_path / "red", echo=lambda _: None, plots=False
    )
    assert bad.exit_code == 1
    assert "**NOT MET**" in (tmp_path / "red" / "expectations.md").read_text()
    more = _study(GREEN, sweep={**MATRIX, "pp": [2, 3]})
    assert evaluate(more, matrix_root, tmp_path / "miss", echo=print, plots=False).exit_code == 1


def _write_study(tmp_path: Path, expect: list, sweep: dict | None = None) -> Path:
    exps = tmp_path / "experiments"
    exps.mkdir(exist_ok=True)
    data = {
        "question": "Does flushing first wedge?",
        "base": ["+exp=smoke", "pp=2"],
        "sweep": sweep
        or {
            "engine/ordering": ["decision_first", "flush_before_decision"],
            "engine/guard": ["rid", "prefix"],
        },
        "expect": expect,
    }
    (exps / "mini.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return exps


@pytest.fixture
def fake_engine(monkeypatch) -> None:
    monkeypatch.setenv("PPX_STUDY_RUN_CMD", f"{sys.executable} {HERE / 'fake_engine.py'}")
    monkeypatch.setenv("FAKE_ENGINE_DELAY", "0.05")


def test_cli_green_with_fake_engine(tmp_path, fake_engine, capsys) -> None:
    exps = _write_study(tmp_path, GREEN[:3])
    code = main(
        [
            "mini",
            "--experiments",
            str(exps),
            "--out",
            str(tmp_path / "out"),
            "--poll",
            "0.05",
            "seed=1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "4/4 done" in out and "-> done (wedged)" in out and "PASS" in out
    assert out.count("    MET") == 3
    assert (tmp_path / "out" / "runs" / "3" / "summary.json").exists()
    log = (tmp_path / "out" / "logs" / "sweep_0.log").read_text()
    assert "++logger.group=mini" in log and "seed=1" in log


def test_cli_red_and_crashed_cell(tmp_path, fake_engine, capsys) -> None:
    exps = _write_study(tmp_path, GREEN[:1] + RED[:1])
    assert (
        main(
            [
                "mini",
                "--experiments",
                str(exps),
                "--out",
                str(tmp_path / "o1"),
                "--poll",
                "0.05",
                "--no-plots",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "NOT MET" in out and "FAIL" in out
    sweep = {"engine/ordering": ["decision_first"], "faults": ["none", "crash"]}
    exps = _write_study(tmp_path, [{"when": {}, "verdict": "served"}], sweep=sweep)
    assert (
        main(
            [
                "mini",
                "--experiments",
                str(exps),
                "--out",
                str(tmp_path / "o2"),
                "--poll",
                "0.05",
                "--no-plots",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "failed" in out and "MISSING  cell engine/ordering=decision_first faults=crash" in out
    assert "exited 1" in out


def test_cli_dry_run_and_from_runs(tmp_path, matrix_root) -> None:
    exps = _write_study(tmp_path, GREEN[:3], sweep=MATRIX)
    proc = subprocess.run(
        [sys.executable, "-m", "ppx.study", "mini", "--experiments", str(exps), "--dry-run"],
        capture_output=True,
        text=True,
        cwd=HERE.parents[1],
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "-m ppx.run -m hydra/launcher=joblib" in proc.stdout and "cell 7:" in proc.stdout
    assert (
        main(
            [
                "mini",
                "--experiments",
                str(exps),
                "--from-runs",
                str(matrix_root),
                "--out",
                str(tmp_path / "again"),
                "--no-plots",
            ]
        )
        == 0
    )
    assert main(["nope", "--experiments", str(exps)]) == 2


def test_docs_example_study_parses() -> None:
    doc = (HERE.parents[1] / "docs" / "analysis.md").read_text()
    block = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    study = parse_study(yaml.safe_load(textwrap.dedent(block)), "ordering_matrix")
    assert study.expand() and study.expect
