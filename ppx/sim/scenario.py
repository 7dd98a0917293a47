"""A scenario: the load, pressure, faults and flips one exploration round runs a design under.

The design under test (admission, ordering, guard, every protocol switch, pp, the model) is
the composed config; a scenario draws what a researcher would otherwise pick by hand to reach
a corner of it: a small workload, pool pressure (`engine.kv.pool_tokens` on every rank, and
one rank's `faults.pool.rank`/`.tokens`), a host
tier whose load-back on one rank is slow, one rank's cached prefixes dropped after a pass
(`faults.cache_drop`), a rank-local retraction (`faults.retract.rid`, where
the design carries rank 0's decision), a delayed channel, flips (how often, how many, what
happens to the slots in flight, whether a continuation survives the cutover, whether a flip
starts mid-prefill and where continuations live: the last three only where the design leaves
them open, design_scope.py), the chunk size and the batch slots; two corners whose mechanism
needs several draws at once are drawn whole in one scenario of four each
(scenario_corners.py). Drawing and shrinking are Hypothesis's: every field shrinks toward the
smaller or the off value (1 request, no fault, no flip), so a failing scenario shrinks to the
least that still fails (scenario_shrink.py deletes requests first).

A scenario is a list of `key=value` overrides on top of the design's, so the replay of a saved
failure is one `python -m ppx.run` command line. It is held as one record per part (Load,
Batching, Pressure, Faults, Flips: scenario_parts.py), each writing its own overrides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st
from omegaconf import OmegaConf

from ppx.config import ConfigError
from ppx.protocol.flip import VoidInflight
from ppx.protocol.flip_due import Clock
from ppx.protocol.policy import policy_of
from ppx.sim.design_scope import carries, open_switches
from ppx.sim.flip_churn import clamp_every
from ppx.sim.scenario_corners import (
    MID_CHUNKS,
    MID_PREFILL,
    MID_PREFIX_LEN,
    SHORT_POOL,
    SHORT_POOL_TOKENS,
    Draw,
    draw_carry,
    draw_focus,
)
from ppx.sim.scenario_parts import Batching, Faults, Flips, Load, Pressure, Scenario
from ppx.sim.timing import FAULT_TIMINGS

__all__ = ["Batching", "Faults", "Flips", "Load", "Pressure", "Scenario", "compose", "scenarios"]

# the pressure and timing values drawn (the first of each list is where a shrink goes)
POOL_TOKENS = (96, 64, 128)
PREFETCH_MS = (50.0, 20.0, 150.0)
PASS_MS = 30.0  # a pp=3 pass in virtual time (sim.step_us=1000)
DELAY_KINDS = ("output", "proxy", "chain")
DELAY_S = (0.005, 0.02, 0.05)
CHUNKS = (64, 8, 16, 32)
BATCH_SLOTS = (16, 1, 2, 4)
PREFIX_LEN = (16, 0, 8, 24, 40)
CACHE_DROP_PASS = (4, 1, 8, 16)  # after which pass a rank drops its unheld cached prefixes


def scenarios(
    base, overrides: Iterable[str] = (), max_requests: int = 6
) -> st.SearchStrategy[Scenario]:
    """Scenarios within the design `base` names: a retraction only where rank 0's decision
    travels, ranks and rids within the world and the workload; the cutover's continuation,
    when a flip may start and where continuations live drawn only where the design leaves
    them open (design_scope.open_switches: a switch the design names is the design under
    test, `overrides` the Hydra overrides that composed it). At most `max_requests`
    requests (a corner's own least is lowered to it)."""
    pp = int(base.pp)
    open_ = open_switches(base, overrides)
    draw = Draw(pp, policy_of(base).decides, open_, carries(base, open_), max_requests)
    return st.builds(_draw, st.data(), st.just(draw))


def search(
    draws: st.SearchStrategy[Scenario],
    prop: Callable[[Scenario], None],
    n: int,
    seed: int,
    phases: tuple[Phase, ...],
    ends: tuple[type[BaseException], ...],
) -> None:
    """`prop` over up to `n` scenarios of `draws`, Hypothesis seeded with `seed`, quiet, with
    no example database and no deadline (a scenario is a whole run); raising one of `ends`
    ends the search (the property's own way to say "found" or "out of time")."""
    test = settings(
        max_examples=n,
        database=None,
        deadline=None,
        verbosity=Verbosity.quiet,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )(given(draws)(prop))
    try:
        hyp_seed(seed)(test)()
    except ends:
        pass


def _draw(data, w: Draw) -> Scenario:
    d = data.draw
    pp = w.pp
    focus = draw_focus(d, w)
    mid, short = focus == MID_PREFILL, focus == SHORT_POOL
    most = w.max_requests
    n = d(st.integers(min(2 if mid else 3 if short else 1, most), most), label="requests")
    lo = d(st.integers(8, 12) if mid else st.integers(1, 8))
    load = Load(
        num_requests=n,
        num_prefixes=d(st.integers(2 if short else 1, 3)),
        prefix_len=d(st.sampled_from(MID_PREFIX_LEN if mid else (40,) if short else PREFIX_LEN)),
        prompt_min=lo,
        prompt_max=lo + d(st.integers(0, 12)),
        max_new=d(st.integers(1, 6)),
        # two at once at least: a continuation beside another resident mid-prefill
        concurrency=d(st.integers(min(2 if mid else 1, n), n)),
        # repeats in two scenarios of five: a copy takes a distinct prompt's place, and the
        # pools' pressure needs distinct prompts (zoo evict_locked's pressure: 7 of 48 probe
        # runs without repeats, 1 of 48 with every prompt twice)
        repeat_count=d(st.sampled_from((1, 1, 1, 2, 3)), label="repeats"),
    )
    chunk = d(st.sampled_from(MID_CHUNKS if mid else CHUNKS))
    batching = Batching(chunk, d(st.sampled_from(BATCH_SLOTS)))
    pressure: dict = {}
    if d(st.booleans(), label="pool pressure on every rank"):
        # a request longer than the pool is refused at submission (the run still serves)
        pressure["pool_all"] = d(st.sampled_from(POOL_TOKENS))
    if short or (pp >= 2 and d(st.booleans(), label="pool pressure")):
        pressure |= {
            "pool_rank": d(st.integers(1, pp - 1)),
            "pool_tokens": d(st.sampled_from(SHORT_POOL_TOKENS if short else POOL_TOKENS)),
        }
    if d(st.booleans(), label="host tier"):
        pressure |= {
            "host_rank": d(st.integers(0, pp - 1)),
            "prefetch_ms": d(st.sampled_from(PREFETCH_MS)),
        }
    flips: dict = {}
    if mid or d(st.booleans(), label="flips"):
        # a flip every pp + 1 passes at least: faster, with a slow load-back on rank 0, no
        # token is ever committed (found at every 2 and 3 passes at pp=3, 4 requests,
        # prefetch 50 ms: `livelocked`, engine.liveness.livelock_flips). Rank 0's load-back
        # late by more than a pass or two churns at pp + 1 too: at pp=3, 2-4 requests, chunk
        # 8-64, flips within 5 passes with it 50 ms late and within 7 with it 150 ms late
        # livelocked (1 of 24 probe runs each, chunk 8), from 6 and 8 on all served; a pass is
        # ~30 ms of virtual time, so a flip waits out the load-back's passes as well
        least = pp + 1
        if pressure.get("host_rank") == 0:
            least += math.ceil(pressure["prefetch_ms"] / PASS_MS)
        flips = {
            "every": d(st.integers(least, max(least, 8 if mid else 12))),
            "max_flips": d(st.integers(1 if mid else 0, 4)),
            "inflight": d(st.sampled_from(("drain", "void"))),
        }
        flips |= draw_carry(d, w, mid)
        # faster, the longest re-prefill never commits a token (ppx/sim/flip_churn.py)
        longest = load.prefix_len + load.prompt_max + load.max_new - 1
        flips["every"] = clamp_every(
            flips["every"], flips["max_flips"], flips["inflight"] == VoidInflight.name,
            flips.get("due") == Clock.name, longest, chunk, pp,
        )  # fmt: skip
    faults: dict = {}
    # faults.retract.rid with flips: a TP-phase follower meets the retracted rid with no row
    # probe (rank1 `admit_entry`: "not in deque"), a limit of the fault, not of a design
    if w.decides and not flips and d(st.booleans(), label="retraction"):
        faults["retract_rid"] = d(st.integers(0, n - 1))
    if d(st.booleans(), label="delay"):
        faults |= {
            "delay_kind": d(st.sampled_from(DELAY_KINDS)),
            "delay_rank": d(st.integers(0, pp - 1)),
            "delay_s": d(st.sampled_from(DELAY_S)),
        }
    if d(st.booleans(), label="cache drop"):
        faults |= {
            "cache_drop_rank": d(st.integers(0, pp - 1)),
            "cache_drop_pass": d(st.sampled_from(CACHE_DROP_PASS)),
        }
    # a scenario with a timed effect (a host-tier load, a delayed send, a flip's or a cache
    # drop's pass count) may leave its landing to the scheduler, so the race with the ranks
    # is searched (fixed first: where a shrink goes)
    if "host_rank" in pressure or "delay_kind" in faults or flips or "cache_drop_rank" in faults:
        faults["timing"] = d(st.sampled_from(FAULT_TIMINGS.names), label="faults.timing")
    return Scenario(load, batching, Pressure(**pressure), Faults(**faults), Flips(**flips))


def compose(base, scenario: Scenario):
    """The design's config with the scenario's overrides, validated (ConfigError if not)."""
    from ppx.validation import validate

    over = OmegaConf.from_dotlist(scenario.overrides(int(base.pp)))
    cfg = OmegaConf.merge(base, over)
    try:
        return validate(cfg)
    except ConfigError:
        raise
    except Exception as e:  # omegaconf's own type errors: one line, as validate words them
        raise ConfigError(str(e).splitlines()[0]) from None


def flips_refused(base) -> str | None:
    """Why the design refuses the flips a scenario draws (the validator's line), or None."""
    pp = int(base.pp)
    try:
        compose(base, Scenario())
    except ConfigError:
        return None  # the design refuses more than flips: nothing to learn about flips here
    try:
        compose(base, Scenario(flips=Flips(every=pp + 1, max_flips=1)))
    except ConfigError as e:
        return str(e)
    return None
