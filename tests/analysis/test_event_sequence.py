"""`event_sequence`: an expectation on the ORDER of a run's events (ppx/study/expect.py), e.g.
rank 0's told for one rid across its offers (#630: 120 -> 64 -> 50), green and red."""

from __future__ import annotations

import pandas as pd

from ppx.study import check_expectations

TOLDS = {"kind": "admit", "rank": 0, "rid": 1, "field": r"prefix_len=(\d+)"}


def _run(tmp_path, details: list[tuple[int, int, str, str]]) -> pd.DataFrame:
    rows = [
        {"t_s": i, "rank": r, "kind": k, "pass_id": i, "slot": 0, "rid": rid, "epoch": 0,
         "detail": d}
        for i, (r, rid, k, d) in enumerate(details)
    ]  # fmt: skip
    pd.DataFrame(rows).to_parquet(tmp_path / "events.parquet")
    return pd.DataFrame([{"run_dir": str(tmp_path), "run_id": "r0", "verdict": "served"}])


def test_a_sequence_is_read_in_order_per_rank_and_rid(tmp_path):
    runs = _run(
        tmp_path,
        [
            (0, 1, "admit", "prefix_len=120"),
            (1, 1, "admit", "prefix_len=120"),  # another rank: not read
            (0, 2, "admit", "prefix_len=7"),  # another rid: not read
            (0, 1, "admit", "prefix_len=64"),
            (0, 1, "admit", "prefix_len=50"),
        ],
    )
    green = {"verdict": "served", "event_sequence": {**TOLDS, "seq": [120, 64, 50]}}
    red = {"event_sequence": [{**TOLDS, "seq": [120, 50]}]}
    unordered = {"event_sequence": {**TOLDS, "seq": [50, 64, 120]}}
    met = [r.met for r in check_expectations(runs, [green, red, unordered])]
    assert met == [True, False, False]
    bad = check_expectations(runs, [red])[0]
    assert "[120, 64, 50]" in bad.detail  # what was seen


def test_text_groups_and_no_events(tmp_path):
    runs = _run(tmp_path, [(0, 5, "escalation", "escalation rid=5 (#944 UNRESOLVABLE): ...")])
    spec = {"kind": "escalation", "field": r"\((#944 \w+)\)", "seq": ["#944 UNRESOLVABLE"]}
    assert check_expectations(runs, [{"event_sequence": spec}])[0].met
    none = {"event_sequence": {"kind": "void", "seq": []}}
    assert check_expectations(runs, [none])[0].met  # no void: the empty sequence
