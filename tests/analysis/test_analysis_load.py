"""load_runs / load_series / load_events / load_requests / compare on synthetic runs."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from fake_runs import write_run

import ppx.analysis as pa
from ppx.analysis.schema import CHOICE_KEYS, SUMMARY_FLOAT, SUMMARY_INT


def test_load_runs_one_row_per_run_typed(matrix_root) -> None:
    df = pa.load_runs(matrix_root)
    assert len(df) == 8
    assert list(df["run_dir"]) == [str(matrix_root / str(i)) for i in range(8)]  # 0..7, natural
    for key in CHOICE_KEYS:
        assert key in df, key
    for col in SUMMARY_INT:
        assert df[col].dtype == "Int64", col
    for col in SUMMARY_FLOAT:
        assert df[col].dtype == "float64", col
    assert isinstance(df["verdict"].dtype, pd.CategoricalDtype)
    assert df["pp"].dtype == "Int64" and df["readiness"].dtype == "boolean"
    assert set(df["verdict"].astype(str)) == {"served", "wedged"}
    assert (df.loc[df["ordering"] == "flush_before_decision", "verdict"] == "wedged").all()
    assert "per_rank" not in df and "choices" not in df
    assert df.loc[0, "overrides"]["engine/guard"] == "rid"
    assert df.loc[0, "overrides"]["exp"] == "smoke"  # `+exp` recorded without the `+`


def test_load_runs_nulls_unknown_fields_and_bad_files(tmp_path) -> None:
    run = write_run(tmp_path / "a", ["engine/ordering=flush_before_decision"], tables=False)
    summary = json.loads((run / "summary.json").read_text())
    summary["new_counter"] = 7  # an engine that grew a field: it still shows up
    summary["oracle_first"] = [3, 4]  # ...unless it is not a scalar
    summary["verdict"] = "brand_new_verdict"
    (run / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "summary.json").write_text("{half a file")
    with pytest.warns(UserWarning, match="skipping unreadable"):
        df = pa.load_runs(tmp_path)
    assert len(df) == 1
    assert pd.isna(df.loc[0, "out_tok_s"])
    assert df.loc[0, "new_counter"] == 7 and "oracle_first" not in df
    assert df.loc[0, "verdict"] == "brand_new_verdict"


def test_load_runs_empty_root_has_columns(tmp_path) -> None:
    df = pa.load_runs(tmp_path)
    assert df.empty and {"verdict", "run_dir", "guard", "voids"} <= set(df.columns)


def test_tables_for_one_or_many_runs(matrix_root) -> None:
    runs = pa.load_runs(matrix_root)
    one = pa.load_series(runs["run_dir"].iloc[0])
    assert {"t_s", "rank", "phase", "epoch", "out_tok_s", "run_dir", "run_id"} <= set(one.columns)
    assert set(one["rank"]) == {-1, 0, 1}
    many = pa.load_events(runs)
    assert many["run_dir"].nunique() == 8
    assert "guard" in many and "verdict" in many  # choices carried from the runs frame
    from_root = pa.load_requests(matrix_root)
    assert from_root["run_id"].nunique() == 8
    assert from_root["output_ids"].map(len).gt(0).all()
    assert pa.load_series([]).empty


def test_compare_is_tidy_with_verdict_counts(matrix_root) -> None:
    runs = pa.load_runs(matrix_root)
    table = pa.compare(runs, by=["ordering", "guard"], metrics=["voids", "out_tok_s"])
    assert len(table) == 4 * 2
    assert list(table.columns[:3]) == ["ordering", "guard", "metric"]
    assert {"mean", "min", "max", "count", "runs", "n_served", "n_wedged"} <= set(table.columns)
    wedged = table[(table["ordering"] == "flush_before_decision") & (table["metric"] == "voids")]
    assert (wedged["n_wedged"] == 2).all() and (wedged["n_served"] == 0).all()
    tok = table[(table["ordering"] == "flush_before_decision") & (table["metric"] == "out_tok_s")]
    assert (tok["count"] == 0).all()  # wedged runs have no throughput figure
    voids = table[table["metric"] == "voids"]
    assert (voids["min"] <= voids["mean"]).all() and (voids["mean"] <= voids["max"]).all()
    wide = pa.wide(table)
    assert len(wide) == 4 and {"voids", "out_tok_s"} <= set(wide.columns)
    counts = pa.verdict_counts(runs, by="ordering")
    assert counts.set_index("ordering").loc["decision_first", "served"] == 4
    with pytest.raises(KeyError):
        pa.compare(runs, by="nope")


def test_postmortem_and_cycle(wedged_run) -> None:
    pm = pa.load_postmortem(wedged_run)
    assert pm.verdict == "wedged" and pm.present
    # pp=3, the engine's flush_before_decision wedge: a 2-rank cycle, rank 2 waiting outside it
    assert pa.cycle_ranks(pm.cycle) == [0, 1]
    assert {"flush", "chain", "decision", "recv"} <= pa.cycle_words(pm.cycle)
    assert pa.parse_cycle(pm.cycle)[0] == (0, 1, "flush chain")
    assert len(pm.waitfor["edges"]) == 3 and set(pm.stacks) == {0, 1, 2}
    assert set(pm.last_events["rank"]) == {0, 1, 2}
    assert {"op", "peer", "kind", "slot", "dur_s"} <= set(pm.ops.columns)
    assert list(pa.cycle_table(pm.cycle)["waits_for"]) == ["rank1", "rank0"]
    assert {(e["src"], e["dst"]) for e in pm.waitfor["edges"]} == {(0, 1), (1, 0), (2, 1)}
    assert pa.parse_cycle(None) == [] and pa.cycle_ranks("") == []


def test_flip_windows_and_impact(flip_run) -> None:
    events = pa.load_events(flip_run)
    flips = pa.flip_windows(events)
    assert len(flips) >= 2
    assert (flips["end_s"] > flips["start_s"]).all()
    impact = pa.flip_impact(flip_run)
    assert len(impact) == len(flips)
    assert impact["voids"].sum() >= len(flips) and impact["retractions"].sum() >= len(flips)
    unfinished = events[events["kind"] != "flip_end"]
    assert pa.flip_windows(unfinished)["end_s"].isna().any()


def test_with_overrides_adds_override_columns(matrix_root) -> None:
    runs = pa.load_runs(matrix_root)
    df = pa.with_overrides(runs, ["engine/guard", "exp", "no.such.key", "pp"])
    assert list(df["engine/guard"]) == list(runs["guard"].astype(str))
    assert set(df["no.such.key"].dropna()) == set()  # never overridden: empty, not an error
    assert df["pp"].dtype == "Int64"  # an existing column is left alone
    assert "engine/guard" not in runs  # a copy
    row = runs.iloc[0]
    assert pa.override_value(row, "+exp") == "smoke" and pa.override_value(row, "guard") == "rid"
    assert pa.override_value(row, "engine/guard") == "rid" and pa.override_value(row, "x") is None
    requests = pa.load_requests(df)
    assert "engine/guard" in requests and "no.such.key" in requests  # carried per request
