"""A scenario's record: one frozen part per kind of knob (Load, Batching, Pressure, Faults,
Flips), each writing its own `key=value` overrides, and the Scenario that holds them. What a
scenario draws and why is scenario.py's; this is what a drawn (or shrunk, or saved) scenario
is, so a replay command line, the shrinker and the tests read one record."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ppx.protocol.continuations import CONTINUATIONS, PerSlot, Retract
from ppx.protocol.flip_due import Drained
from ppx.sim.timing import FAULT_TIMINGS


@dataclass(frozen=True)
class Load:
    """The workload (`workload.*`): a few short requests."""

    num_requests: int = 1
    num_prefixes: int = 1
    prefix_len: int = 16
    prompt_min: int = 1
    prompt_max: int = 4
    max_new: int = 1
    concurrency: int = 1
    repeat_count: int = 1  # workload.bench.repeat_count: a copy may find its whole prompt cached
    skip: tuple[int, ...] = ()  # workload.skip: prompts a shrink deleted from the middle

    def overrides(self) -> list[str]:
        # the last two are left out at their defaults (a replay line stays as it was)
        o = [f"workload.{f.name}={getattr(self, f.name)}" for f in fields(self)][:-2]
        o += [f"workload.bench.repeat_count={self.repeat_count}"] * (self.repeat_count > 1)
        return o + [f"workload.skip=[{','.join(map(str, self.skip))}]"] * bool(self.skip)


@dataclass(frozen=True)
class Batching:
    """The engine's pass shape (`engine.chunk_size`, `engine.max_batch`)."""

    chunk_size: int = 64
    max_batch: int = 16

    def overrides(self) -> list[str]:
        return [f"engine.chunk_size={self.chunk_size}", f"engine.max_batch={self.max_batch}"]


@dataclass(frozen=True)
class Pressure:
    """KV pool pressure and a slow host-tier load-back."""

    pool_all: int = 0  # > 0: every rank's pool (engine.kv.pool_tokens); 0: the design's
    pool_rank: int = -1  # -1: every rank the design's pool
    pool_tokens: int = 0
    host_rank: int = -1  # -1: no host tier; else the rank whose load-back is slow
    prefetch_ms: float = 0.0

    def overrides(self, pp: int) -> list[str]:
        o = []
        if self.pool_all > 0:
            o.append(f"engine.kv.pool_tokens={self.pool_all}")
        if self.pool_rank >= 0:
            o += [f"faults.pool.rank={self.pool_rank}", f"faults.pool.tokens={self.pool_tokens}"]
        if self.host_rank >= 0:
            ms = [0.0] * pp
            ms[self.host_rank] = self.prefetch_ms
            o += ["engine.kv.host_tier=true", f"engine.kv.prefetch_ms=[{','.join(map(str, ms))}]"]
        return o


@dataclass(frozen=True)
class Faults:
    """A rank-local retraction, a delayed channel, and who picks when a timed effect lands
    (`faults.*`)."""

    retract_rid: int = -1
    delay_kind: str | None = None
    delay_rank: int = 0
    delay_s: float = 0.0
    timing: str = FAULT_TIMINGS.names[0]  # fixed; choice: the scheduler's (ppx/sim/timing.py)
    # a rank evicts every cached prefix no request holds after a pass (the #963 shape: its
    # next match is shorter than rank 0's offer); under `choice`, at that pass or later
    cache_drop_rank: int = -1
    cache_drop_pass: int = 0

    def overrides(self) -> list[str]:
        o = [f"faults.timing={self.timing}"] if FAULT_TIMINGS.get(self.timing) else []
        if self.cache_drop_rank >= 0:
            o += [
                f"faults.cache_drop.rank={self.cache_drop_rank}",
                f"faults.cache_drop.after_pass={self.cache_drop_pass}",
            ]
        if self.retract_rid >= 0:  # redelivered: the row probe's hedge meets the late hop
            o += [f"faults.retract.rid={self.retract_rid}", "faults.retract.redeliver=true"]
        if self.delay_kind is not None:
            o += [
                f"faults.delay.kind={self.delay_kind}",
                f"faults.delay.rank={self.delay_rank}",
                f"faults.delay.s={self.delay_s}",
            ]
        return o


@dataclass(frozen=True)
class Flips:
    """Flips by pass count (`flip.*`): how often, how many, what becomes of the slots."""

    every: int = 0  # passes between flips; 0: no flip
    max_flips: int = 0
    inflight: str = "drain"
    continuation: str = Retract.name  # flip.continuation: "survive" carries it across the cutover
    due: str = Drained.name  # flip.due: "clock" starts a due flip with a prompt mid-prefill
    # engine.admission.continuations=per_slot: a continuation per slot, so a cutover into the
    # one-slot TP plan can carry two (the #959 guard's second_continuation_refusals)
    per_slot: bool = False

    def overrides(self) -> list[str]:
        if self.every <= 0:
            return []
        o = [
            "flip.enabled=true",
            "flip.every_s=0.0",
            f"flip.every_passes={self.every}",
            f"flip.max_flips={self.max_flips}",
            f"flip.inflight={self.inflight}",
        ]
        if self.continuation != Retract.name:  # else the design's own (retract by default)
            o.append(f"flip.continuation={self.continuation}")
        if self.due != Drained.name:
            o.append(f"flip.due={self.due}")
        if self.per_slot:
            o.append(f"{CONTINUATIONS.key}={PerSlot.name}")
        return o


@dataclass(frozen=True)
class Scenario:
    load: Load = Load()
    batching: Batching = Batching()
    pressure: Pressure = Pressure()
    faults: Faults = Faults()
    flips: Flips = Flips()

    def overrides(self, pp: int) -> list[str]:
        """The scenario as `key=value` overrides (what a replay command line carries)."""
        return [
            *self.load.overrides(),
            *self.batching.overrides(),
            *self.pressure.overrides(pp),
            *self.faults.overrides(),
            *self.flips.overrides(),
        ]

    def size(self) -> tuple:
        """What a smaller failing scenario has less of: requests first, then what is on."""
        parts = (getattr(self, f.name) for f in fields(self))
        on = sum(1 for p in parts for f in fields(p) if getattr(p, f.name) != f.default)
        return (self.load.num_requests, on, self.load.max_new, self.load.prefix_len)

    def as_dict(self) -> dict:
        return asdict(self)
