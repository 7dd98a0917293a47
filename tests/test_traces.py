"""Trace replay: the Azure, BurstGPT and Mooncake formats (small format-faithful samples made
here; no trace ships), the window and scales, malformed rows refused by file and line, and
Mooncake's hash ids driving the prefix cache."""

from __future__ import annotations

import json

from ppx_helpers import assert_refused, compose, on_gloo, run_inproc

from ppx.frontend.make import make_workload
from ppx.frontend.trace_formats import read_azure, read_burstgpt, read_mooncake
from ppx.frontend.traces import window

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.0000000,lots,2
2023-11-16 18:15:52.3951690,879,15
"""

BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5.0,ChatGPT,472,18,490,Conversation log
45.0,ChatGPT,1087,0,1087,Conversation log
118.0,GPT-4,417,276,693,API log
130.0,ChatGPT,12
"""


def mooncake_rows(shared: bool) -> list[dict]:
    """Four requests of three 512-token blocks; with `shared`, all open with the same two."""
    rows = []
    for i in range(4):
        ids = [0, 1, 100 + i] if shared else [10 * i, 10 * i + 1, 10 * i + 2]
        rows.append({"timestamp": 200 * i, "input_length": 1500, "output_length": 128, "hash_ids": ids})  # fmt: skip
    return rows


def _write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _mooncake(path, rows, extra: str = "") -> str:
    return _write(path, "".join(json.dumps(r) + "\n" for r in rows) + extra)


def test_azure_rows_times_and_a_malformed_row(tmp_path):
    p = _write(tmp_path / "azure.csv", AZURE)
    t = read_azure(p)
    assert [r.input_len for r in t.rows] == [374, 396, 0, 879]
    assert [round(r.t_s, 4) for r in t.rows] == [0.0, 4.3146, 4.3146, 5.7146]
    assert t.rows[2].error == f"{p}:4: invalid literal for int() with base 10: 'lots'"
    assert [bool(r.error) for r in t.rows] == [False, False, True, False]


def test_burstgpt_failed_rows_skipped_and_counted(tmp_path):
    p = _write(tmp_path / "burst.csv", BURSTGPT)
    t = read_burstgpt(p)
    assert t.failed == 1  # the 0-response-token row
    assert [(r.t_s, r.input_len, r.output_len) for r in t.rows[:2]] == [(5.0, 472, 18), (118.0, 417, 276)]  # fmt: skip
    assert t.rows[2].error == f"{p}:5: 3 columns, expected 6"


def test_mooncake_rows_and_refusals(tmp_path):
    bad = '{"timestamp": 900, "input_length": 4000, "output_length": 1, "hash_ids": [1]}\nnope\n'
    p = _mooncake(tmp_path / "mc.jsonl", mooncake_rows(True), bad)
    t = read_mooncake(p)
    assert t.rows[1].hash_ids == (0, 1, 101) and t.rows[1].t_s == 0.2
    assert t.rows[4].error == f"{p}:5: input_length=4000 is longer than its 1 blocks"
    assert t.rows[5].error.startswith(f"{p}:6: not JSON")


def test_window_and_time_scale(tmp_path):
    t = read_burstgpt(_write(tmp_path / "b.csv", BURSTGPT))
    rows = window(t, 100.0, 20.0, 10)
    # 118 s - (5 + 100) s, and the malformed row after it, at its predecessor's time
    assert [(r.t_s, r.input_len, bool(r.error)) for r in rows] == [(13.0, 417, False), (13.0, 0, True)]  # fmt: skip
    assert len(window(t, 0.0, 0.0, 2)) == 2  # num_requests caps the rows
    p = _mooncake(tmp_path / "m.jsonl", mooncake_rows(True))
    over = ["workload=trace", f"workload.path={p}", "workload.trace.token_scale=0.03125"]
    wl = make_workload(compose(*over, "workload.trace.time_scale=0.5"))
    assert [round(wl.gap_after(i, None), 9) for i in range(4)] == [0.1, 0.1, 0.1, 0.0]


def test_mooncake_equal_hash_ids_are_equal_blocks(tmp_path):
    over = ["workload=trace", "workload.trace.token_scale=0.03125"]  # a block is 16 tokens
    wl = make_workload(compose(*over, f"workload.path={_mooncake(tmp_path / 's', mooncake_rows(True))}"))  # fmt: skip
    a, b = wl.request(0).prompt, wl.request(1).prompt
    assert len(a) == 47 and a[:32] == b[:32] and a[32:] != b[32:]
    wl = make_workload(compose(*over, f"workload.path={_mooncake(tmp_path / 'd', mooncake_rows(False))}"))  # fmt: skip
    assert wl.request(0).prompt[:16] != wl.request(1).prompt[:16]  # red arm: distinct ids


def test_bad_trace_refused_before_spawn(tmp_path):
    assert_refused(["workload=trace", f"workload.path={tmp_path}/none"], "trace file is missing")
    p = _write(tmp_path / "h.csv", "time,tokens\n1,2\n")
    assert_refused(["workload=trace", "workload.trace.format=azure", f"workload.path={p}"], "expected the header")  # fmt: skip
    p = _mooncake(tmp_path / "m.jsonl", mooncake_rows(True))
    assert_refused(["workload=trace", f"workload.path={p}", "workload.trace.window_start_s=9"], "no request in the window")  # fmt: skip


def _serve(run_dir, rows, *extra: str, transport: str = "sim", tail: str = "") -> dict:
    path = _mooncake(run_dir.parent / f"{run_dir.name}.jsonl", rows, tail)
    over = [
        "engine.transport=sim", "pp=3", "workload=trace", f"workload.path={path}",
        "workload.trace.token_scale=0.03125", "workload.trace.time_scale=0.05", *extra,
    ]  # fmt: skip
    return run_inproc(str(run_dir), *(over if transport == "sim" else on_gloo(over)))


def test_mooncake_sharing_reaches_the_prefix_cache(tmp_path):
    shared = _serve(tmp_path / "shared", mooncake_rows(True))
    distinct = _serve(tmp_path / "distinct", mooncake_rows(False))
    for s in (shared, distinct):
        assert s["verdict"] == "served" and s["served"] == 4 and s["oracle_mismatches"] == 0
    # three later requests reuse the first one's two shared blocks (32 tokens each)
    assert shared["cached_tokens"] >= 3 * 32
    assert distinct["cached_tokens"] == 0  # red arm: no shared hash ids, nothing cached


def test_mooncake_serves_on_gloo_with_a_malformed_row(tmp_path):
    s = _serve(tmp_path / "gloo", mooncake_rows(True), transport="gloo", tail="{oops\n")
    assert (s["verdict"], s["served"], s["refused"], s["oracle_mismatches"]) == ("served", 4, 1, 0)
    assert s["cached_tokens"] >= 3 * 32


def test_trace_counts_reach_summary_json_and_wandb(tmp_path):
    from ppx.telemetry.wandb_sink import wandb_summary

    path = _write(tmp_path / "burst.csv", BURSTGPT)  # a failed row, a malformed row
    over = ["workload=trace", "workload.trace.format=burstgpt", f"workload.path={path}",
            "workload.trace.token_scale=0.03125"]  # fmt: skip
    s = run_inproc(str(tmp_path / "run"), "engine.transport=sim", "pp=3", *over,
                   "workload.trace.time_scale=0.001")  # fmt: skip
    want = {"trace_rows": 3, "trace_window_rows": 3, "trace_malformed": 1, "trace_skipped": 1}
    assert (s["verdict"], s["served"], s["refused"]) == ("served", 2, 1)
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {k: on_disk[k] for k in want} == want
    assert {k: wandb_summary(on_disk)[k] for k in want} == want
    # red arm: a clean trace counts nothing refused or skipped, a generator reads no trace
    clean = _write(tmp_path / "clean.csv", BURSTGPT.replace("45.0,ChatGPT,1087,0", "45.0,ChatGPT,1087,5").rsplit("130.0", 1)[0])  # fmt: skip
    counts = make_workload(compose(*over[:2], f"workload.path={clean}")).loader_counts()
    assert counts == {"trace_rows": 3, "trace_window_rows": 3, "trace_malformed": 0, "trace_skipped": 0}  # fmt: skip
    assert make_workload(compose("workload=random")).loader_counts() == {}
