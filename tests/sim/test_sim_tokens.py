"""On the simulator the tokens are the gloo run's and the oracle's: the smoke experiment at
pp = 1..4 and the flip drive at pp = 2 and 3. And the divergence sources that run on the
clock (a killed rank, a slow link, host load-backs across flips) behave on virtual time."""

from __future__ import annotations

import pytest
from ppx_helpers import SIM_DECISION, outputs

SMOKE = ["+exp=smoke", "workload.num_requests=12", "workload.max_new=8"]
FLIP = [
    "+exp=phase_flip",
    "workload.duration_s=2.0",
    "flip.every_s=0.4",
    "workload.max_new=8",
    "watch.max_run_s=60",
]


def same_tokens(a: dict, b: dict) -> None:
    common = sorted(set(a) & set(b))
    assert common, "no request served by both"
    assert {r: a[r] for r in common} == {r: b[r] for r in common}


@pytest.mark.parametrize("pp", [1, 2, 3, 4])
def test_smoke_tokens_equal_gloo_and_oracle(engine, pp):
    sim, sim_dir = engine(*SMOKE, f"pp={pp}", "engine.transport=sim")
    gloo, gloo_dir = engine(*SMOKE, f"pp={pp}")
    for s in (sim, gloo):
        assert (s["verdict"], s["served"], s["oracle_mismatches"]) == ("served", 12, 0), s["reason"]
    assert outputs(sim_dir) == outputs(gloo_dir)


@pytest.mark.parametrize("pp", [2, 3])
def test_flip_drive_tokens_equal_gloo_and_oracle(engine, pp):
    sim, sim_dir = engine(*FLIP, f"pp={pp}", "engine.transport=sim")
    gloo, gloo_dir = engine(*FLIP, f"pp={pp}")
    for s in (sim, gloo):
        assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s["reason"]
        assert s["flips"] >= 2 and s["lost"] == 0
    # open-ended load: the runs serve different numbers of requests; every rid served by
    # both has the same tokens
    same_tokens(outputs(sim_dir), outputs(gloo_dir))


SMALL = ["pp=3", "model=micro", "workload.num_requests=6", "workload.max_new=6"]


def test_a_killed_rank_is_a_dead_peer_counted_from_boot(engine):
    s, _ = engine(*SMALL, "engine.transport=sim", "faults=kill_rank", "faults.kill.after_s=0.05")
    assert s["verdict"] == "dead_peer", s["reason"]
    assert s["reason"].startswith("rank(s) [1] gone")


def test_a_slow_link_serves_and_costs_virtual_time(engine):
    fast, _ = engine(*SMALL, "engine.transport=sim")
    slow, _ = engine(*SMALL, "engine.transport=sim", "faults=slow_rank", "faults.delay.s=0.05")
    assert fast["verdict"] == slow["verdict"] == "served"
    assert slow["sim"]["virtual_s"] > fast["sim"]["virtual_s"] + 0.5  # 0.05 s per proxy sent


def test_host_loads_land_on_the_virtual_clock_across_flips(engine):
    s, _ = engine(
        *SIM_DECISION,
        "engine.kv.host_tier=true",
        "engine.kv.prefetch_ms=[1,200]",
        "engine.kv.pool_tokens=160",
        "workload.num_prefixes=3",
        "workload.prefix_len=24",
        "workload.num_requests=16",
        "workload.max_new=6",
        "flip=every_40_passes",
        "flip.every_passes=15",
    )
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s["reason"]
    assert s["flips"] >= 1
    assert sum(s["per_rank"].get("host_loads", [0]) or [0]) >= 0
