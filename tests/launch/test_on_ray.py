"""Explorer shards and study cells on a local Ray cluster (one head whose two CPUs run two
worker processes, started once for the file): the merged exploration equals the same seeds
run with `explore.fanout.workers`, a study's table equals the one its local launcher gives."""

from __future__ import annotations

import pandas as pd
import pytest
from sim.explore_helpers import explore_in

from ppx.sim.report import summary_dict

LAP = ["pp=3", "engine/admission=decision", "engine/ordering=blocking_lap", "explore.schedules=6"]
SAME = ["schedule", "strategy", "verdict", "reason", "cycle", "tokens", "steps", "virtual_s"]


@pytest.fixture(scope="module")
def ray_head():
    from ppx.launch.children import descendants
    from ppx.launch.ray_cluster import local_head

    before = descendants()
    with local_head(2) as address:
        yield address
    # no raylet, GCS, agent or worker the head started outlives it
    assert {p: n for p, n in descendants().items() if p not in before} == {}


def _summary(ex) -> dict:
    s = summary_dict(ex, {}, None)
    return {k: v for k, v in s.items() if k not in ("wall_s", "schedules_per_s", "failures")}


def test_ray_cluster_gives_the_workers_summary(tmp_path, ray_head):
    import ray

    on_ray = explore_in(
        tmp_path / "ray", *LAP, "explore.fanout.workers=2", f"explore.fanout.ray={ray_head}"
    )
    assert ray.cluster_resources().get("CPU") == 2  # the head's two worker CPUs ran the shards
    workers = explore_in(tmp_path / "workers", *LAP, "explore.fanout.workers=2")
    pd.testing.assert_frame_equal(on_ray.table[SAME], workers.table[SAME])
    assert _summary(on_ray) == _summary(workers)
    assert {k: f.index for k, f in on_ray.failures.items()} == {
        k: f.index for k, f in workers.failures.items()
    }
    # red arm: other seeds on the same cluster are another exploration, and the comparison
    # sees it
    other = explore_in(tmp_path / "other", *LAP, "explore.fanout.workers=2", f"explore.fanout.ray={ray_head}",
                       "explore.seed=100")  # fmt: skip
    assert not other.table[SAME].equals(workers.table[SAME])


STUDY = {
    "question": "Does a study's sweep on Ray give the table its local launcher gives?",
    "base": ["engine.transport=sim", "pp=2", "logger=none", "engine/admission=decision",
             "workload=shared_prefix", "workload.num_requests=4", "workload.max_new=3"],
    "sweep": {"engine/ordering": ["decision_first", "flush_before_decision"]},
    "launcher": "basic",
    "expect": [{"when": {"engine/ordering": "decision_first"}, "verdict": "served", "served": 4},
               {"when": {"engine/ordering": "flush_before_decision"}, "verdict": "wedged"}],
}  # fmt: skip


def _study_in(out, study, **kw):
    from ppx.study.cli import evaluate, run_study

    codes = run_study(study, out, [], poll_s=0.2, echo=lambda *_: None, **kw)
    return codes, evaluate(study, out / "runs", out, echo=lambda *_: None, plots=False)


def test_a_study_on_ray_gives_the_local_table(tmp_path, ray_head):
    import shutil

    from ppx.study import parse_study

    study = parse_study(STUDY, "mini")
    codes, on_ray = _study_in(tmp_path / "ray", study, ray=ray_head)
    local_codes, local = _study_in(tmp_path / "local", study)
    assert codes == [0, 0] and local_codes == [0]  # one task per cell; one local multirun
    assert on_ray.exit_code == local.exit_code == 0
    same = [c for c in local.table.columns if c not in ("run_dir", "wall_s")]
    pd.testing.assert_frame_equal(on_ray.table[same], local.table[same])
    # red arm: a cell the Ray sweep lost is seen (a missing cell, a shorter table)
    shutil.copytree(tmp_path / "ray" / "runs", tmp_path / "lost" / "runs")
    shutil.rmtree(tmp_path / "lost" / "runs" / "1")
    from ppx.study.cli import evaluate

    lost = evaluate(study, tmp_path / "lost" / "runs", tmp_path / "lost", echo=lambda *_: None,
                    plots=False)  # fmt: skip
    assert lost.exit_code == 1 and len(lost.missing) == 1 and len(lost.table) == 1


def test_a_head_that_did_not_start_is_ended_and_started_again(monkeypatch):
    """ray-project/ray#65983 in miniature: the first head's raylet dies (its agent was slow);
    what that head had started is killed and a second head is started."""
    import subprocess

    import ray.cluster_utils

    from ppx.launch import ray_cluster
    from ppx.launch.children import descendants

    started = []

    class Head:
        address = "127.0.0.1:1"

        def __init__(self, **kw):
            started.append(subprocess.Popen(["sleep", "60"]))  # its GCS, say
            if len(started) == 1:
                raise Exception("The current node timed out during startup.")

        def shutdown(self):
            started[-1].kill()

    monkeypatch.setattr(ray.cluster_utils, "Cluster", Head)
    with ray_cluster.local_head(2) as address:
        assert address == Head.address and len(started) == 2
        assert started[0].wait(timeout=5) == -9  # the failed head's process was killed
        assert started[1].pid in descendants()
    assert started[1].wait(timeout=5) == -9
    # red arm: a head that never starts is refused after HEAD_TRIES, nothing left behind
    monkeypatch.setattr(ray_cluster, "HEAD_TRIES", 1)
    started.clear()
    with pytest.raises(Exception, match="timed out during startup"):
        with ray_cluster.local_head(2):
            pass
    assert started[0].wait(timeout=5) == -9


def test_red_a_bad_ray_address_is_refused_in_one_line(tmp_path, capsys):
    from ppx_helpers import assert_refused

    from ppx.study.cli import main

    assert_refused(
        ["explore.fanout.ray=bogus"], "explore.fanout.ray='bogus': local | auto | HOST:PORT"
    )
    exps = tmp_path / "experiments"
    exps.mkdir()
    (exps / "mini.yaml").write_text(__import__("yaml").safe_dump(STUDY))
    assert main(["mini", "--experiments", str(exps), "--ray", "ray://nowhere"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --ray='ray://nowhere': local | auto | HOST:PORT | ray://HOST:PORT"
