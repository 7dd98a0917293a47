"""workload.skip: prompts left out by index, each kept request served as the full run drew it
(how a shrunk scenario deletes a request from the middle), with repeats and prompt files."""

from __future__ import annotations

import json

import pytest
from ppx_helpers import assert_refused, one_row_trace
from ppx_helpers import workload_prompts as _prompts

from ppx.frontend.workloads import kept_source


@pytest.mark.parametrize("skip", [[], [0], [2], [1, 3], [3, 1, 1]])
def test_the_kept_requests_are_the_full_runs_less_the_skipped(skip):
    over = ["workload.num_prefixes=2", "workload.bench.output_len=8", "workload.bench.range_ratio=0.5"]  # fmt: skip
    full = _prompts(*over, "workload.num_requests=8")
    n = 8 - len(set(skip))
    got = _prompts(*over, f"workload.num_requests={n}", f"workload.skip={skip}")
    assert got == [p for i, p in enumerate(full) if i not in skip]  # prefix group kept too


def test_skip_counts_prompts_under_repeats():
    over = ["workload.bench.repeat_count=2", "workload.bench.output_len=8"]
    full = _prompts(*over, "workload.num_requests=6")  # prompts 0 0 1 1 2 2
    got = _prompts(*over, "workload.num_requests=4", "workload.skip=[1]")
    assert got == full[:2] + full[4:]


def test_kept_source():
    assert [kept_source(n, [1, 3]) for n in range(4)] == [0, 2, 4, 5]
    assert [kept_source(n, []) for n in range(3)] == [0, 1, 2]  # red arm: nothing skipped


def test_a_prompt_file_skips_its_lines_and_caps_the_count(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": [i + 1] * 3}) + "\n" for i in range(3)))
    over = ["workload=jsonl", f"workload.path={path}", "workload.num_requests=10"]
    assert [p for p, _ in _prompts(*over, "workload.skip=[1,7]")] == [(1, 1, 1), (3, 3, 3)]


def test_skip_refusals(tmp_path):
    assert_refused(["workload.skip=[2,-1]"], "workload.skip=[2, -1] holds a negative prompt index")
    assert_refused(
        [*one_row_trace(tmp_path), "workload.skip=[0]"], "workload.skip=[0]: workload=trace replays"
    )
