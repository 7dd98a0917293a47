"""The explorer's shards on a local Ray cluster (a head with two worker CPUs): the merged
exploration equals the same seeds run with `explore.workers`."""

from __future__ import annotations

import pandas as pd
from explore_helpers import explore_in

from ppx.sim.report import summary_dict

LAP = ["pp=3", "engine/admission=decision", "engine/ordering=blocking_lap", "explore.schedules=6"]
SAME = ["schedule", "strategy", "verdict", "reason", "cycle", "tokens", "steps", "virtual_s"]


def _summary(ex) -> dict:
    s = summary_dict(ex, {}, None)
    return {k: v for k, v in s.items() if k not in ("wall_s", "schedules_per_s", "failures")}


def test_ray_cluster_gives_the_workers_summary(tmp_path, monkeypatch):
    # before ray is imported (it reads them then): see fanout_ray.connect
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "180")
    import ray

    try:
        workers = explore_in(tmp_path / "workers", *LAP, "explore.workers=2")
        on_ray = explore_in(tmp_path / "ray", *LAP, "explore.workers=2", "explore.ray=local")
        assert ray.is_initialized() and ray.cluster_resources().get("CPU") == 2
        pd.testing.assert_frame_equal(on_ray.table[SAME], workers.table[SAME])
        assert _summary(on_ray) == _summary(workers)
        assert {k: f.index for k, f in on_ray.failures.items()} == {
            k: f.index for k, f in workers.failures.items()
        }
        # red arm: other seeds on the same cluster are another exploration, and the
        # comparison sees it
        other = explore_in(tmp_path / "other", *LAP, "explore.workers=2", "explore.ray=local",
                           "explore.seed=100")  # fmt: skip
        assert list(other.table["reason"]) != list(workers.table["reason"]) or list(
            other.table["steps"]
        ) != list(workers.table["steps"])
    finally:
        ray.shutdown()
