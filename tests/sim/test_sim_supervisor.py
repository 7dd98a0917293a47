"""The simulator's supervisor holds the process supervisor's RunTally (metrics, reports, the
outcome from the board) instead of inheriting Supervisor and replacing its run() whole."""

from __future__ import annotations

from ppx_helpers import compose

from ppx.run_tally import RunTally
from ppx.sim.world import SimSupervisor
from ppx.supervisor import Supervisor


def test_sim_supervisor_is_composed_and_tallies_like_the_process_one():
    assert Supervisor not in SimSupervisor.__mro__
    cfg = compose("engine.transport=sim", "pp=2", "workload.num_requests=3", "logger=none")
    sim, real = SimSupervisor(cfg, None), Supervisor(cfg, "unused")
    assert isinstance(sim.tally, RunTally) and isinstance(real.tally, RunTally)
    out = sim.run()
    assert (out["verdict"], sim.driver.count("served")) == ("served", 3)
    # run.py reads these off either supervisor: the tally's own lists, filled by the run
    assert sorted(sim.tally.reports) == [0, 1] and sim.tally.metrics
    assert set(out) >= {"passes", "max_inflight", "board_counts", "sim"}
