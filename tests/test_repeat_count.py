"""workload.bench.repeat_count (vLLM benchmark_prefix_caching.py's `--repeat-count`): each
prompt served K times in a row, by the generators and the prompt files alike; refused below 1
and for a trace (whose rows are its requests)."""

from __future__ import annotations

import json

from ppx_helpers import assert_refused, compose, one_row_trace
from ppx_helpers import workload_prompts as _prompts

from ppx.frontend.make import make_workload


def test_each_generated_prompt_comes_k_times_in_a_row():
    over = ["workload.num_requests=7", "workload.bench.output_len=8", "workload.bench.range_ratio=0.5"]  # fmt: skip
    got = _prompts(*over, "workload.bench.repeat_count=3")
    assert [got.index(p) for p in got] == [0, 0, 0, 3, 3, 3, 6]  # same prompt and max_new
    assert len({p for p, _ in got}) == 3
    # a copy is the prompt its first copy had without repeats (request 0, 1, 2 of the run)
    plain = _prompts(*over)
    assert [got[0], got[3], got[6]] == plain[:3]
    assert len({p for p, _ in plain}) == 7  # red arm: without repeats no prompt comes twice


def test_a_repeated_generated_shared_prefix_prompt_keeps_its_group():
    over = ["workload=generated_shared_prefix", "workload.bench.repeat_count=2"]
    got = _prompts(*over, "workload.num_requests=4")
    assert got[0] == got[1] and got[2] == got[3] and got[1] != got[2]
    # prompts 0 and 1 (requests 0-3) are both in group 0: one system prompt
    assert got[0][0][:64] == got[2][0][:64]


def test_prompt_file_lines_repeat_and_cap_the_count(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": [i + 1] * 3}) + "\n" for i in range(2)))
    over = ["workload=jsonl", f"workload.path={path}", "workload.num_requests=10"]
    got = _prompts(*over, "workload.bench.repeat_count=2")
    assert [p for p, _ in got] == [(1, 1, 1), (1, 1, 1), (2, 2, 2), (2, 2, 2)]
    assert len(_prompts(*over)) == 2  # red arm: the file's two lines, once each


def test_repeat_count_refusals(tmp_path):
    assert_refused(["workload.bench.repeat_count=0"], "workload.bench.repeat_count=0 must be >= 1")
    over = one_row_trace(tmp_path)
    assert_refused([*over, "workload.bench.repeat_count=2"], "workload=trace replays each row once")
    assert make_workload(compose(*over)).count == 1
