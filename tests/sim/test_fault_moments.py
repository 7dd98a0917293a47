"""The moments a pass count names, as choice points: `faults.cache_drop.after_pass` and
`flip.every_passes` under `faults.timing=choice` (ppx/sim/timing.py, ChosenMoment).

The race: rank 1 loses its cached prefix (`faults.cache_drop`) at the end of pass 2. Before
then, request 0 is still prefilling and nothing is cached, so the drop costs nothing and
every request is served; once request 0 has been served and its prefix cached, a drop makes
rank 0 offer a prefix rank 1 no longer holds, and under the default guard that request is
retracted forever (`livelocked`). With a fixed timing every schedule meets the drop at the
same place (red: one outcome, whatever the seed); with the drop's moment a choice of the
scheduler, random and pct exploration reach both, the same for the same seed, and a found
schedule replays, from its choices and through `explore.replay`. The same for a flip: fixed
at the pass the count names, chosen at that pass or a later one. Exhaustive search walks the
landing: the fixed drop has one outcome, the chosen one both."""

from __future__ import annotations

import os

from explore_helpers import explore_in, explorer_cfg, replay
from omegaconf import OmegaConf

from ppx.sim.runner import Runner
from ppx.sim.strategy import PctStrategy, RandomStrategy, ReplayStrategy
from ppx.sim.timing import sim_tasks
from ppx.sim.world import SimSupervisor
from ppx.telemetry.events import read_events

IDLE = ["pp=2", "explore.clock=idle"]
DROP = [
    *IDLE,
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "workload.num_prefixes=1",
    "workload.prefix_len=24",
    "workload.concurrency=1",
    "faults.cache_drop.rank=1",
    "faults.cache_drop.after_pass=2",
    "engine.liveness.livelock_passes=8",  # a retraction that repeats: named sooner
]
DROP4 = [*DROP, "workload.num_requests=4", "workload.max_new=2"]
FLIP = [*IDLE, "workload.num_requests=3", "workload.max_new=4", "flip.enabled=true"]
FLIP += ["flip.every_s=0.0", "flip.every_passes=3", "flip.max_flips=1"]
SEEDS = range(12)


def _outcome(res) -> tuple:
    return res.verdict, res.row["tokens"], tuple(sorted(res.counters.items()))


def _drops(timing: str, make) -> dict[tuple, list[int]]:
    """Outcome -> the seeds that reached it."""
    runner = Runner(explorer_cfg(*DROP4, f"faults.timing={timing}"))
    seen: dict[tuple, list[int]] = {}
    for s in SEEDS:
        seen.setdefault(_outcome(runner.run(make(s, runner.cfg))), []).append(s)
    return seen


def _random(s, cfg):
    return RandomStrategy(s)


def _pct(s, cfg):
    return PctStrategy(s, 2, sim_tasks(cfg), 40)


def test_red_a_fixed_cache_drop_lands_at_one_place_for_every_seed():
    seen = _drops("fixed", _random)
    assert len(seen) == 1, seen
    ((verdict, *_),) = seen
    assert verdict == "served"  # after pass 2 nothing is cached yet: the drop costs nothing


def test_green_a_chosen_cache_drop_races_the_cached_prefix():
    for make in (_random, _pct):
        verdicts = {o[0] for o in _drops("choice", make)}
        assert verdicts == {"served", "livelocked"}, (make, verdicts)


def test_a_chosen_drop_replays_from_its_choices():
    runner = Runner(explorer_cfg(*DROP4, "faults.timing=choice"))
    runs = [runner.run(RandomStrategy(s)) for s in SEEDS]
    late = next(r for r in runs if r.verdict == "livelocked")
    again = runner.run(ReplayStrategy(late.choices))
    assert _outcome(again) == _outcome(late) and again.choices == late.choices
    assert [_outcome(r) for r in runs] == [_outcome(runner.run(RandomStrategy(s))) for s in SEEDS]


def test_a_found_drop_replays_through_explore_replay(tmp_path):
    over = [*DROP4, "faults.timing=choice", "explore.schedules=12", "explore.shrinker.runs=0"]
    ex = explore_in(tmp_path / "ex", *over)
    assert "livelocked" in set(ex.table.verdict)
    ((key, path),) = ex.paths.items()
    assert key.startswith("livelocked")
    s = replay(tmp_path / "run", over, path)
    assert s["verdict"] == "livelocked"


def test_exhaustive_search_walks_the_drops_landing(tmp_path):
    base = [*DROP, "workload.num_requests=2", "workload.max_new=1"]
    base += ["explore.strategy=exhaustive", "explore.schedules=300", "explore.shrinker.runs=0"]
    fixed = explore_in(tmp_path / "fixed", *base, "faults.timing=fixed").table
    chosen = explore_in(tmp_path / "choice", *base, "faults.timing=choice").table
    # a drop fixed at the end of pass 2 always meets the cached prefix; chosen, it also
    # lands after request 1's match
    assert set(fixed.verdict) == {"livelocked"}
    assert set(chosen.verdict) == {"livelocked", "served"}


def _flip_passes(tmp_path, timing: str, make) -> dict[tuple, list[int]]:
    """The passes rank 0 announced a flip in -> the seeds."""
    cfg = explorer_cfg(*FLIP, f"faults.timing={timing}")
    typed, models = OmegaConf.to_object(cfg), {}
    seen: dict[tuple, list[int]] = {}
    for s in SEEDS:
        d = str(tmp_path / f"{timing}{s}")
        out = SimSupervisor(cfg, d, make(s, cfg), typed, models).run()
        assert out["verdict"] == "served", out["reason"]
        ev = read_events(os.path.join(d, "ranks", "rank0.events.jsonl"))
        flips = tuple(e["pass_id"] for e in ev if e["kind"] == "flip_start")
        seen.setdefault(flips, []).append(s)
    return seen


def test_red_a_fixed_flip_is_announced_at_the_counted_pass(tmp_path):
    assert set(_flip_passes(tmp_path, "fixed", _random)) == {(3,)}


def test_green_a_chosen_flip_is_announced_at_that_pass_or_later(tmp_path):
    seen = _flip_passes(tmp_path, "choice", _random)
    assert (3,) in seen and len(seen) > 1, seen
    assert all(len(p) == 1 and p[0] >= 3 for p in seen), seen  # never before the count
