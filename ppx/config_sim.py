"""The simulator's and the explorer's schema: `explore.*` (the explorer's knobs, in sections
per strategy, fan-out and shrink) and `sim.*` (a simulated run's clock and its wire's rules).
Part of the structured config in ppx/config.py."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PctCfg:
    """explore.strategy=pct: the bug depth and the choice points it is drawn over."""

    depth: int = 3  # the bug depth d
    depth_cycle: bool = True  # schedule i runs at depth 1 + i mod d (else d)
    horizon: int = 0  # choice points the change points are drawn over (0: one run's)


@dataclass
class DfsCfg:
    """explore.strategy=dfs: the walk's bounds (explore.reduce prunes it)."""

    bound: int = 0  # branch only within the first `bound` steps (0: no step bound)
    delays: int | None = None  # at most this many choices of a higher runnable task


@dataclass
class ExhaustiveCfg:
    """explore.strategy=exhaustive: what the walk keeps of the states it has seen."""

    cache: bool = True  # skip states explored before (fingerprint.py)
    liveness: bool = True  # (with the cache): fair cycles of the state graph


@dataclass
class FanoutCfg:
    """Who runs the schedules: local worker processes, a Ray cluster or launcher shards."""

    workers: int = 1  # local processes the schedules are sharded over
    ray: str | None = None  # a Ray cluster (local | auto | ray://HOST:PORT): the shards as tasks
    shard: int = 0  # a launcher job's shard (of `shards`): python -m ppx.explore -m ...
    shards: int = 1
    batch: int = 25  # one progress line per this many schedules


@dataclass
class ShrinkCfg:
    """How much a failure found is shrunk before it is saved."""

    runs: int = 200  # runs spent shrinking each failing schedule (0: save it as found)
    scenario_s: float = 30.0  # explore.scenarios: the scenario shrink's seconds (0: no bound)


@dataclass
class ExploreCfg:
    """The explorer's knobs (python -m ppx.explore) and a simulated run's schedule (the
    simulator's own clock step and step bound: `sim.step_us`, `sim.max_steps`)."""

    strategy: str = "random"  # random | pct | dfs | portfolio | exhaustive | replay
    seed: int = 0  # the schedule seed (schedule i of an exploration uses seed + i)
    schedules: int = 100  # how many schedules `ppx.explore` runs
    reduce: str = "sleep"  # dfs: sleep (sleep sets over step footprints) | none
    portfolio: list[str] = field(default_factory=lambda: ["random", "pct"])  # its members
    replay: str | None = None  # a schedule.txt to replay (strategy replay)
    clock: str = "step"  # step (time moves every step) | idle (only when no task can run)
    # scenario generation (ppx/sim/scenarios.py): draw this many scenarios of the design, each
    # run under `scenario_schedules` schedules; 0: explore the one scenario the config names
    scenarios: int = 0
    scenario_schedules: int = 4
    budget_s: float = 0.0  # scenarios, exhaustive: stop after this many seconds (0: none)
    pct: PctCfg = field(default_factory=PctCfg)
    dfs: DfsCfg = field(default_factory=DfsCfg)
    exhaustive: ExhaustiveCfg = field(default_factory=ExhaustiveCfg)
    fanout: FanoutCfg = field(default_factory=FanoutCfg)
    shrinker: ShrinkCfg = field(default_factory=ShrinkCfg)


@dataclass
class SimCfg:
    """The simulator (engine.transport=sim): its virtual clock and step bound, and whose
    point-to-point rules its wire follows. Every knob but the first three is one of NCCL's
    rules (docs/simulation.md, "NCCL semantics")."""

    step_us: float = 1000.0  # virtual time one scheduling step takes (a pp=3 pass: ~30 ms)
    max_steps: int = 2_000_000  # a run longer than this ends `timeout`
    semantics: str = "gloo"  # gloo | nccl (payloads by NCCL's rules, headers by gloo's)
    send_buffer_bytes: int = 1048576  # unreceived bytes a send may leave per direction (0 = sync)
    connect: str = "eager"  # eager (payload pairs connected at start-up) | lazy (by their members)
    # lazy only: first_use (inside the first payload call) | global (a start-up walk in the one
    # global order) | next_first (a start-up walk, each rank its next neighbour first)
    connect_order: str = "first_use"
    stream_order: bool = True  # one communicator's operations run in issue order
    independent_progress: bool = False  # two communicators' operations progress apart (no promise)
    grouped: bool = True  # a group() of sends and receives runs as one operation
    # forward (r -> r + 1) | pair (and last -> 0) | kind (old) | world (one default group)
    communicators: str = "forward"
    p2p_api: str = "send"  # send (a 2-rank communicator per pair) | batch (the group's device one)
    host_sync: str = "none"  # none | device (compute waits for the rank's NCCL work)
