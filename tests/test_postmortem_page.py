"""`python -m ppx.postmortem RUN_DIR`: the page a person opens, checked in a real browser
(headless Chromium): the cycle's ranks are read from the rendered page."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from browser import rendered_dom
from fr_trace import cycle_edges
from ppx_helpers import ROOT, run_inproc

WEDGE = ["engine.transport=sim", "pp=3", "engine/admission=decision",
         "engine/ordering=flush_before_decision"]  # fmt: skip


def _page(run_dir: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "ppx.postmortem", run_dir], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return os.path.join(run_dir, "postmortem.html")


def _cycle_ranks(dom: str) -> set[tuple[int, int]]:
    return {
        (int(a), int(b))
        for a, b in re.findall(r'class="cycle-rank">rank(\d+) waits on rank(\d+)<', dom)
    }


def test_wedge_page_renders_its_cycle_in_chromium(tmp_path):
    run_dir = str(tmp_path / "wedge")
    s = run_inproc(run_dir, *WEDGE)
    assert s["verdict"] == "wedged"
    path = _page(run_dir)
    dom = rendered_dom(path)
    assert _cycle_ranks(dom) == cycle_edges(s["cycle"]) == {(0, 1), (1, 0)}
    assert 'data-rank="rank0"' in dom and 'class="node cycle"' in dom  # the graph was drawn
    # the Flight Recorder table, the replay command and the timeline are on the page
    assert "chain:0-&gt;1" in dom and "explore.replay=" in dom and 'id="gantt"' in dom
    # red arm: the file itself holds no cycle rank; only the page's script, run by the
    # browser, draws them (a test reading the bytes would see nothing)
    raw = open(path).read()
    assert _cycle_ranks(raw) == set() and 'data-rank="rank0"' not in raw


def test_served_page_has_no_cycle(tmp_path):
    run_dir = str(tmp_path / "served")
    s = run_inproc(run_dir, "engine.transport=sim", "pp=2", "workload.num_requests=4")
    assert s["verdict"] == "served"
    dom = rendered_dom(_page(run_dir))
    assert _cycle_ranks(dom) == set() and '<p id="cycle-ranks">no cycle</p>' in dom


def test_a_bad_run_dir_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ppx.postmortem", str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0
    assert "no summary.json" in out.stderr and not os.listdir(tmp_path)


def test_first_divergence_is_the_first_pass_whose_batches_differ(tmp_path):
    import pandas as pd

    from ppx.postmortem.facts import divergence

    def ev(rank, pass_id, rid, kind="admit", detail="prefix_len=0"):
        return {"t_s": 0.0, "rank": rank, "kind": kind, "pass_id": pass_id, "slot": 0,
                "rid": rid, "epoch": 0, "detail": detail}  # fmt: skip

    agree = [ev(r, p, p) for p in range(3) for r in range(2)]
    pd.DataFrame(agree).to_parquet(tmp_path / "events.parquet")
    assert divergence(str(tmp_path)) is None  # red arm: the same batches every pass
    pd.DataFrame(agree + [ev(1, 2, 9), ev(0, 1, 5, "retraction", "told=8")]).to_parquet(
        tmp_path / "events.parquet"
    )
    assert divergence(str(tmp_path)) == "pass 1: rank0 retraction: told=8"
    pd.DataFrame(agree + [ev(1, 2, 9)]).to_parquet(tmp_path / "events.parquet")
    assert divergence(str(tmp_path)) == "pass 2: batches differ (rank0: [2]; rank1: [2, 9])"
    # a rank that went past pass 1 without admitting there (rank 1's admit dropped)
    skipped = [e for e in agree if (e["rank"], e["pass_id"]) != (1, 1)]
    pd.DataFrame(skipped).to_parquet(tmp_path / "events.parquet")
    assert divergence(str(tmp_path)) == "pass 1: batches differ (rank0: [1]; rank1: [])"
    # red arm: a rank whose events stop before pass 2 (the run ended) is not a divergence
    ended = [e for e in agree if (e["rank"], e["pass_id"]) != (1, 2)]
    pd.DataFrame(ended).to_parquet(tmp_path / "events.parquet")
    assert divergence(str(tmp_path)) is None
