"""The #1175 group completion floor across phases and cutovers (issue 26).

Every rank's 64-token pool evicts two 24-token prefixes to its host tier; rank 0's load-back
lands in 2 ms, ranks 1 and 2's in 300 ms; pp=3 flips TP <-> PP. Two defects, both of the floor:
- the floor governed the PP phase only (`group_pp`, ppx before issue 26): in the TP phase rank 0
  admitted on its own completion, the pending follower voided every TP pass, and the void
  bound ended the run. `group` asks the same question in the TP pass header and folds the
  answers from the pass's all-reduce.
- a follower's record of a load it began survived the cutover: in the new layout (a new tree,
  the other host tier) the record read the fresh tree as a load that terminated short, a false
  #1176 contradiction that stopped the group. The carrier resets at the cutover (a plain bug:
  no switch; the regression test below).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from ppx_helpers import HOST_PREFETCH, Clock, assert_refused, design, serve_once, typed_cfg

from ppx.core import Kind, Message, Req
from ppx.engine.admission import make_seams
from ppx.engine.cache.host import HostTier
from ppx.engine.cache.kv import KVCache
from ppx.engine.faults.rank_faults import RankFaults
from ppx.protocol.prefetch_carrier import COMPLETE, CONTRADICTION, PENDING, Carrier
from ppx.protocol.prefetch_floor import tp_absorb, tp_row
from ppx.protocol.registry import Protocol

PF3 = [
    "pp=3",
    *HOST_PREFETCH,
    "engine.kv.prefetch_ms=[2,300,300]",
    "engine.transport=sim",
    "flip=every_40_passes",
]
TP_RED = (
    "livelock: 24 consecutive voided passes with no token served (TP phase); "
    "(rid, told, local) repeating: [(5, 24, -1)]; voided slots (last 8): [0, 0, 0, 0, 0, 0, 0, 0]"
)


def _cache(clock: Clock) -> KVCache:
    c = KVCache(num_layers=1, pool_tokens=24, kv_heads=1, head_dim=2, max_reqs=4, max_context=64)
    c.host = HostTier(c.k, c.v, 0.3, clock)
    return c


def _evicted(clock: Clock) -> tuple[KVCache, list[int]]:
    """A follower's PP-layout cache whose 24-token prefix went to the host tier."""
    c = _cache(clock)
    prefix = list(range(1, 25))
    serve_once(c, 0, prefix)
    c.free += c.tree.evict(c.tree.size, c.host.save)
    return c, prefix


class _Sched:
    def __init__(self, cache: KVCache, req: Req) -> None:
        self.cache, self.reqs, self.waiting, self.chunked = cache, {req.rid: req}, [req], None


# -- #1176 across the cutover: the exact state of the false contradiction -------------------
@pytest.mark.parametrize("reset", [False, True])
def test_a_load_begun_before_the_cutover_is_no_contradiction_after_it(reset):
    clock = Clock()
    pp_cache, prefix = _evicted(clock)
    follower, req = Carrier(rank=1, world=3, bound_s=1.0), Req(5, prefix + [40, 41], max_new=8)
    assert follower.measure(pp_cache, req) == (0, PENDING)  # its load began in the PP layout
    assert follower.loads[5][2] == 24  # what it expects the load to bring
    # the cutover: the KV is released, the TP layout has its own cache and host tier
    tp_cache = _cache(clock)
    if reset:
        follower.reset()
    if not reset:  # red: the record outlives its layout; the fresh tree reads as "short"
        assert follower.measure(tp_cache, req) == (0, CONTRADICTION)
        return
    assert follower.measure(tp_cache, req) == (0, 0)  # green: a number, nothing held here
    assert follower.loads == {}


def test_rank0_forgets_the_folded_numbers_but_not_how_long_a_rid_waited():
    rank0 = Carrier(rank=0, world=3, bound_s=1.0)
    assert rank0.admit(5, 24, now=10.0).action == "defer"
    rank0.absorb((5, COMPLETE, 24, 0))  # the PP layout's floor
    rank0.owe = 17
    rank0.reset()
    assert rank0.table == {} and rank0.owe == -1
    assert rank0.admit(5, 24, now=10.5).action == "defer"  # the TP layout must answer anew
    assert rank0.admit(5, 24, now=11.0).action == "clamp"  # the bound counts from 10.0


# -- #1175 in the TP phase: the header asks, the all-reduce answers ------------------------
def test_the_tp_phase_folds_the_followers_rows_from_one_all_reduce():
    clock = Clock()
    cache, prefix = _evicted(clock)
    req = Req(5, prefix + [40, 41], max_new=8)
    one, two = Carrier(1, 3, 1.0), Carrier(2, 3, 1.0)
    rows1 = tp_row(one, _Sched(cache, req), 5, 3)  # its load starts: pending, no number
    assert rows1.tolist() == [[0, 0, 0, 0], [1, 5, 0, PENDING], [0, 0, 0, 0]]
    silent = tp_row(two, _Sched(cache, Req(9, [1], max_new=1)), 5, 3)  # rid 5 unknown there
    assert not silent.any()
    rank0 = Carrier(0, 3, 1.0)
    tp_absorb(rank0, 5, rows1 + silent)  # what the all-reduce sums
    assert rank0.table[5] == (PENDING, 0, 0b110)  # rank 1 pending, rank 2 silent: both named
    clock.now += 0.3  # rank 1's load landed
    rows = tp_row(one, _Sched(cache, req), 5, 3)
    rows[2] = torch.tensor([2, 5, 24, 0])  # rank 2 holds it in its tree
    tp_absorb(rank0, 5, rows)
    assert rank0.table[5] == (COMPLETE, 24, 0)
    assert rank0.admit(5, 24, now=100.3).prefix == 24


def test_the_floor_governs_the_tp_phase_only_in_the_group_design():
    assert design("engine.admission.prefetch.floor", "group").in_tp_phase
    assert not design("engine.admission.prefetch.floor", "group_pp").in_tp_phase


class _Events:
    def emit(self, *a, **k) -> None:
        pass


class _Rank0:
    """Rank 0's context in the first TP phase of a flipping forwarded run (epoch 1)."""

    rank, world, is_first, is_last, epoch, phase = 0, 3, True, False, 1, "tp"

    def __init__(self, floor: str) -> None:
        self.cfg = typed_cfg(
            {
                "pp": 3,
                "engine.admission.name": "forwarded",
                "engine.admission.on_refusal": "stop",
                "engine.admission.prefetch.floor": floor,
                "engine.kv.host_tier": True,
                "flip.enabled": True,
            }
        )
        self.faults = RankFaults(self.cfg, self.rank)  # none on: every hook inert
        self.t, self.events = SimpleNamespace(now=lambda: 100.0), _Events()

    def stop(self, reason, p=None):
        raise AssertionError(reason)


@pytest.mark.parametrize("floor", ["group_pp", "group"])
def test_rank0_admits_in_the_tp_phase_on_the_group_floor_not_its_own(floor):
    ctx = _Rank0(floor)
    seams = make_seams(ctx, Protocol(ctx.cfg))
    offer, floor_seam = seams.prefill.offer, seams.floor
    req = Req(5, list(range(1, 25)) + [40, 41], max_new=8)
    told = offer.clamp(req, 24)  # rank 0's own load landed: it holds all 24 tokens
    if floor == "group_pp":  # red: its own completion; ranks 1 and 2 are still loading
        assert told == 24 and floor_seam.query(7) == -1
        return
    assert told is None and floor_seam.query(7) == 5  # deferred, asked in the TP header
    rows = torch.zeros((3, 4), dtype=torch.int64)
    rows[1], rows[2] = torch.tensor([1, 5, 0, 24]), torch.tensor([2, 5, 0, PENDING])
    floor_seam.absorb(5, rows)
    assert offer.clamp(req, 24) is None  # rank 2 still pending
    rows[2] = torch.tensor([2, 5, 0, 24])
    floor_seam.absorb(5, rows)
    assert offer.clamp(req, 24) == 24 and floor_seam.carrier.n["prefetch_floor_admits"] == 1


def test_a_cutover_and_a_lap_from_before_it_leave_no_number_of_the_old_layout():
    ctx = _Rank0("group")
    ctx.phase = "pp"
    seams = make_seams(ctx, Protocol(ctx.cfg))
    offer, carrier, returns = seams.prefill.offer, seams.floor.carrier, seams.returns
    req = Req(5, list(range(1, 25)) + [40, 41], max_new=8)
    assert offer.clamp(req, 24) is None
    carrier.absorb((5, COMPLETE, 24, 0))  # the PP layout's floor
    seams.cutover.released()
    ctx.epoch = 2
    assert carrier.table == {}
    # the last rank folded this before the cutover; rank 0 reads it after
    returns.absorb_lap(Message(Kind.LAP, 0, 60, 1, aux=(5, COMPLETE, 24, 0)))
    assert carrier.table == {} and offer.clamp(req, 24) is None
    returns.absorb_lap(Message(Kind.LAP, 0, 61, 2, aux=(5, COMPLETE, 24, 0)))
    assert offer.clamp(req, 24) == 24


# -- the engine --------------------------------------------------------------------------
def test_red_group_pp_voids_the_tp_phase_green_group_serves_with_flips_at_pp3(engine):
    flips = [*PF3, "flip.every_passes=60"]  # a phase outlasts a 300 ms load
    red, _ = engine(*flips, "engine.admission.prefetch.floor=group_pp")
    assert red["verdict"] == "livelocked" and red["reason"] == TP_RED, red["reason"]
    green, d = engine(*flips)
    assert green["verdict"] == "served", green["reason"]
    assert green["served"] == 12 and green["oracle_mismatches"] == 0 and green["flips"] >= 4
    # the floor decided every admission it deferred: covered by the group, or clamped to what
    # the group holds when the bound ran out (which of the two depends on the schedule)
    assert green["voids"] == 0 and green["prefetch_floor_admits"] + green["prefetch_clamped"] > 0
    ev = pd.read_parquet(os.path.join(d, "events.parquet"))
    deferred = ev[(ev.kind == "prefetch_defer") & (ev["rank"] == 0)]
    assert (deferred.epoch % 2 == 1).any()  # deferred in a TP phase (odd epochs), not voided


def test_after_tp_to_pp_red_rank0_admits_on_its_own_number_green_group_serves(engine):
    # the fork's red (boot weg1b5): a TP phase first, the cutover to PP re-admits over the host
    # tier; rank 0's load lands in 2 ms, rank 1's in 300 ms, and rank 0 admits on its own
    once = [*PF3, "flip.start_phase=tp", "flip.every_passes=10", "flip.max_flips=1"]
    red, _ = engine(*once, "engine.admission.prefetch.floor=rank0")
    assert red["verdict"] == "stopped" and red["flips"] == 1, red["reason"]
    assert red["reason"] == (
        "forwarded refusal (on_refusal=stop): rank1 slot=1 pass=106 told=[5] reached=[]: "
        "cannot execute rid=5 prefix_len=24 (local -1)"
    )
    green, _ = engine(*once)
    assert green["verdict"] == "served" and green["served"] == 12, green["reason"]
    assert green["flips"] == 1 and green["prefetch_deferred"] > 0
    assert green["refusals"] == 0 and green["oracle_mismatches"] == 0


def test_the_carrier_forgets_the_old_layout_at_the_cutover(engine):
    # a flip every 15 passes: loads begun in one layout are read in the next. Before the
    # reset this stopped at once: "prefetch floor contradiction (#1176): rid=2 rank1 load
    # terminated short (matched 0)"
    s, _ = engine(*PF3, "flip.every_passes=15")
    assert s["verdict"] == "served", s["reason"]
    assert s["served"] == 12 and s["oracle_mismatches"] == 0 and s["flips"] > 10


REFUSED = {
    "no flips": (
        ["pp=2", "engine/admission=forwarded", "engine.kv.host_tier=true",
         "engine.admission.prefetch.floor=group_pp"],
        "engine.admission.prefetch.floor=group_pp differs from group only in a flip's TP phase",
    ),
    "no host tier": (
        ["pp=2", "engine/admission=forwarded", "flip=every_2s",
         "engine.admission.prefetch.floor=group_pp"],
        "engine.admission.prefetch.floor=group_pp needs engine.kv.host_tier=true",
    ),
}  # fmt: skip


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_group_pp_is_refused_where_it_means_nothing(overrides, message):
    assert_refused(overrides, message)
