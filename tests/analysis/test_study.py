"""The study runner: spec parsing, command lines, expectation checks (green and red arms),
the written report, and the whole CLI driving a fake engine in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml
from fake_runs import MATRIX, write_run

import ppx.analysis as pa
from ppx.study import check_expectations, evaluate, load_study, parse_study
from ppx.study.cli import _printable, main
from ppx.study.report import bar_metrics
from ppx.study.spec import parse_override
from ppx.study.sweep import build_commands, cell_name, launcher_overrides

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


def _run_mini(exps, out) -> int:
    return main(
        ["mini", "--experiments", str(exps), "--out", str(out), "--poll", "0.05", "--no-plots"]
    )


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
    assert _run_mini(exps, tmp_path / "o1") == 1
    out = capsys.readouterr().out
    assert "NOT MET" in out and "FAIL" in out
    sweep = {"engine/ordering": ["decision_first"], "faults": ["none", "crash"]}
    exps = _write_study(tmp_path, [{"when": {}, "verdict": "served"}], sweep=sweep)
    assert _run_mini(exps, tmp_path / "o2") == 1
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


def test_reason_contains_green_and_red(matrix_root) -> None:
    runs = pa.load_runs(matrix_root)
    wedged = {"engine/ordering": "flush_before_decision"}
    green = [
        {"when": wedged, "reason_contains": "NO PROGRESS"},  # case-insensitive
        {"when": wedged, "reason_contains": ["forwarded refusal", "with no progress"]},  # any
    ]
    red = [
        {"when": wedged, "reason_contains": "forwarded refusal"},
        {"when": {"engine/ordering": "decision_first"}, "reason_contains": "no progress"},
    ]
    assert [r.met for r in check_expectations(runs, green)] == [True, True]
    bad = check_expectations(runs, red)
    assert [r.met for r in bad] == [False, False]
    assert "reason='every rank blocked for at least 2.0s with no progress'" in bad[0].detail
    assert "reason=''" in bad[1].detail and len(bad[1].failing) == 4


def test_same_outputs_green_and_red(tmp_path) -> None:
    # The fake engine's tokens are seeded by the overrides: the same overrides give the
    # same tokens (as the oracle demands of any policy), different ones do not.
    same = ["+exp=smoke", "pp=2", "engine/ordering=decision_first"]
    write_run(tmp_path / "0", [*same, "engine/admission=rank_local"], n_requests=6)
    for i in (1, 2):
        write_run(tmp_path / str(i), [*same, "engine/admission=decision"], n_requests=6)
    runs = pa.load_runs(tmp_path)
    green = {"when": {"engine/admission": "decision"}, "same_outputs": True, "verdict": "served"}
    red = {"when": {}, "same_outputs": True}
    (ok,) = check_expectations(runs, [green])
    assert ok.met and "outputs of 2 runs (6 requests" in ok.detail and "identical" in ok.detail
    assert "same_outputs: True" in ok.description
    (bad,) = check_expectations(runs, [red])
    assert not bad.met and "differ" in bad.detail and "outputs differ for rids" in bad.detail
    assert len(bad.failing) == 2  # both decision runs differ from the first (rank_local) run
    (alone,) = check_expectations(
        runs, [{"when": {"engine/admission": "rank_local"}, "same_outputs": True}]
    )
    assert not alone.met and "at least 2 runs" in alone.detail


def test_defs_merge_columns_and_short_names(tmp_path) -> None:
    text = textwrap.dedent(
        """
        question: q
        defs:
          A: &A {faults: pool_skew, faults.pool.tokens: 400, workload.num_requests: 24}
        cells:
          - {<<: *A, engine/admission: rank_local}
          - {<<: *A, engine/admission: decision, engine/guard: "off"}
        columns: [faults.pool.tokens, engine/admission, engine/guard]
        """
    )
    (tmp_path / "fam.yaml").write_text(text)
    study = load_study("fam", tmp_path)
    cells = study.expand()
    assert cells[1] == {
        "faults": "pool_skew",
        "faults.pool.tokens": "400",
        "workload.num_requests": "24",
        "engine/admission": "decision",
        "engine/guard": "off",  # quoted in YAML, else it would be the boolean false
    }
    assert study.cell_keys == ["faults.pool.tokens", "engine/admission", "engine/guard"]
    assert (
        cell_name(cells[0], study.cell_keys) == "faults.pool.tokens=400 engine/admission=rank_local"
    )
    assert cell_name(cells[0]).startswith("faults=pool_skew ")
    with pytest.raises(ValueError, match="columns"):
        parse_study({"question": "q", "columns": "pp"}, "bad")


def test_bar_metrics_skip_all_zero_counts() -> None:
    df = pd.DataFrame(
        {"voids": [0, 3], "retractions": [0, 0], "flips": [0, 0], "out_tok_s": [1.0, None]}
    )
    assert bar_metrics(df) == ["voids", "out_tok_s"]
    df["refusals"], df["retractions"], df["flips"] = [1, 0], [2, 0], [1, 1]
    assert bar_metrics(df) == ["voids", "retractions", "refusals", "out_tok_s"]  # at most 4
    assert bar_metrics(pd.DataFrame({"voids": [0]})) == ["voids"]


def test_printed_table_drops_empty_columns_and_cuts_long_text() -> None:
    table = pd.DataFrame(
        {
            "verdict": ["served", "stopped"],
            "cycle": [None, None],
            "reason": ["", "forwarded refusal (on_refusal=stop): " + "x" * 80],
            "voids": [1, 2],
            "out_tok_s": [float("nan"), float("nan")],
            "run_dir": ["0", "1"],
        }
    )
    shown = _printable(table, width=40)
    assert list(shown.columns) == ["verdict", "reason", "voids"]
    assert shown["reason"].iloc[0] == "" and len(shown["reason"].iloc[1]) == 40
    assert shown["reason"].iloc[1].endswith("...")


EXPERIMENTS = HERE.parents[1] / "experiments"
DECISION_ORDERINGS = {"decision_first", "flush_before_decision", "blocking_lap"}
DECISION_ORDERINGS |= {"decision_after_launch"}


def _could_match(cell: dict[str, str], base: dict[str, str], when: dict) -> bool:
    # Statically: a `when` key the cell (or base) sets must agree; one it leaves to the
    # config's defaults or to the run's results (verdict, run_id) cannot be decided here.
    known = {**base, **cell}
    for key, want in (when or {}).items():
        wants = {str(w) for w in (want if isinstance(want, list) else [want])}
        if key in known and known[key] not in wants:
            return False
    return True


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.yaml")), ids=lambda p: p.stem)
def test_experiment_files_are_consistent(path: Path) -> None:
    """Every study in experiments/ parses, its cells are well-formed and every expectation
    can select a cell (a typo in `when` would otherwise only show after a full run)."""
    study = load_study(path.stem, EXPERIMENTS)
    cells = study.expand()
    assert cells and study.expect and study.question
    base = dict(parse_override(b) for b in study.base)
    for cell in cells:
        merged = {**base, **cell}
        if merged.get("engine/admission") in ("decision", "forwarded"):
            # Those policies need an ordering with a decision step (a config error otherwise).
            assert merged.get("engine/ordering") in DECISION_ORDERINGS, cell
        assert merged.get("logger") == "none", "studies run without W&B unless asked"
    # a cell's labels (incident, arm, ...) are selectable like its overrides
    labelled = [{**c, **(study.labels[i] if study.labels else {})} for i, c in enumerate(cells)]
    for exp in study.expect:
        for side in ("when", "lhs", "rhs"):
            if side in exp:
                scope = {**(exp.get("when") or {}), **exp[side]}
                assert any(_could_match(c, base, scope) for c in labelled), (path.stem, exp)
    assert set(study.cell_keys) <= {k for c in labelled for k in c} | set(base)
