"""The fault registry (ppx/engine/faults/registry.py): one typed section per fault, each
refusal one line before anything is spawned, every preset composes; and each hook kind
(base.py) does what its fault says on the rank it names and nothing elsewhere."""

from __future__ import annotations

import os
from dataclasses import fields

import pytest
from ppx_helpers import ROOT, assert_refused, typed_cfg
from timing_helpers import HandTiming

from ppx.core import Flag, Kind, Message
from ppx.engine.faults.base import RUN, Candidates, Readiness
from ppx.engine.faults.rank_faults import RankFaults, RunFaults
from ppx.engine.faults.registry import FAULTS, SECTIONS, active, refusal
from ppx.fault_sections import FaultsCfg


def test_one_section_per_fault_and_the_schema_stays_small():
    assert sorted(SECTIONS) == sorted(f.key for f in FAULTS)
    assert len(fields(FaultsCfg)) <= 15  # issue #34: the largest class holds <= 15
    assert active(typed_cfg()) == []  # every section's defaults leave its fault off
    assert refusal(typed_cfg()) is None


@pytest.mark.parametrize(
    "preset", sorted(p[:-5] for p in os.listdir(os.path.join(ROOT, "conf", "faults")))
)
def test_every_preset_composes_and_names_a_section(preset):
    from ppx_helpers import compose

    from ppx.validation import validate

    design = ["engine/admission=decision", "engine/ordering=decision_first"]
    cfg = validate(compose("pp=2", f"faults={preset}", *design))
    on = [f.key for f in active(cfg)]
    assert preset == "none" or on, f"faults={preset} turns no fault on"


@pytest.mark.parametrize(
    "overrides, line",
    [
        (["faults.lose.kind=outptu"], "faults.lose.kind='outptu': chain | proxy | output"),
        (["faults.delay.kind=x"], "faults.delay.kind='x': chain | proxy"),
        (["faults.delay.kind=output"], "faults.delay.kind=output names no rank"),
        (["faults.lose.rank=1"], "faults.lose.rank=1 names no message kind"),
        (["pp=3", "faults.corrupt.rank=1"], "faults.corrupt.rank=1: tokens are sampled"),
        (["faults.offer_flap.tokens=3"], "faults.offer_flap.tokens=3: a token count >= 0"),
        (["faults.retract.redeliver=true"], "faults.retract.redeliver=true means nothing"),
        (["pp=3", "faults.match_cap.tokens=[1]"], "faults.match_cap.tokens=[1]: one token"),
        (["pp=2", "faults.cache_drop.rank=5"], "faults.cache_drop.rank=5 faults.cache_drop"),
        (["faults.timing=later"], "faults.timing='later': fixed | choice"),
        (["faults.timing=choice"], "faults.timing=choice needs engine.transport=sim"),
    ],
)
def test_a_bad_section_is_one_line_before_anything_spawns(overrides, line):
    assert_refused(overrides, line)


# -- each hook kind, on the rank its section names ------------------------------------------
def test_candidates_lifo_reverses_the_scan_on_its_rank_only():
    cfg = typed_cfg({"pp": 2, "faults.lifo.rank": 1})
    assert RankFaults(cfg, 1).candidates.order([1, 2, 3]) == [3, 2, 1]
    assert type(RankFaults(cfg, 0).candidates) is Candidates  # inert: FIFO
    assert RankFaults(cfg, 0).candidates.order([1, 2, 3]) == [1, 2, 3]


def test_readiness_match_cap_offer_flap_and_cache_drop_chain_on_rank_0():
    cfg = typed_cfg(
        {
            "pp": 2,
            "faults.match_cap.tokens": [50, -1],
            "faults.offer_flap.tokens": 7,
            "faults.cache_drop.rank": 0,
            "faults.cache_drop.after_pass": 2,
        }
    )
    r0 = RankFaults(cfg, 0).readiness
    assert r0.match(64) == 50 and r0.match(10) == 10
    assert r0.offer(5, 40) == 40
    r0.voided({5})  # a void of rid 5 drops its unshared extension: 7 tokens short
    assert r0.offer(5, 40) == 33 and r0.offer(6, 40) == 40
    r0.voided({5})  # the next void regains them
    assert r0.offer(5, 40) == 40
    cache = _Cache()
    for pass_id in range(4):
        r0.after_pass(pass_id, cache)
    assert cache.dropped == 1  # after pass 2 only
    assert type(RankFaults(cfg, 1).readiness) is Readiness  # rank 1: whole match, no flap


class _Cache:
    dropped = 0

    def drop_unlocked(self):
        self.dropped += 1


def test_cache_drop_under_a_chosen_timing_drops_once_its_moment_lands():
    cfg = typed_cfg({"pp": 2, "faults.cache_drop.rank": 1, "faults.cache_drop.after_pass": 2})
    t, cache = HandTiming(), _Cache()
    r1 = RankFaults(cfg, 1, t).readiness
    for pass_id in range(4):
        r1.after_pass(pass_id, cache)
    ((label, moment),) = t.armed  # armed at the end of pass 2, once
    assert label == "faults.cache_drop" and cache.dropped == 0  # red: fixed would have dropped
    moment.fired = True
    for pass_id in range(4, 7):
        r1.after_pass(pass_id, cache)
    assert cache.dropped == 1 and len(t.armed) == 1  # green: at the first look after, once


def test_carry_retract_announces_then_redelivers():
    from ppx.core import Req

    cfg = typed_cfg({"pp": 2, "faults.retract.rid": 3, "faults.retract.redeliver": True})
    carry = RankFaults(cfg, 0).carry
    assert carry.chain_out([], 0) == ([], 0, ())  # armed: nothing to say yet
    req = Req(3, [1, 2, 3], 4)

    class Sched:
        requeued: list = []

        def requeue(self, r):
            self.requeued.append(r.rid)

    sched = Sched()
    carry.after_output(sched, [(req, 9)])
    assert sched.requeued == [3]
    reqs, flags, words = carry.chain_out([], 0)
    assert flags & Flag.RETRACT and words
    again, flags, _ = carry.chain_out([], 0)  # the late hop carries the rid again
    assert [r.rid for r in again] == [3] and not flags & Flag.RETRACT
    assert carry.chain_out([], 0) == ([], 0, ())


def _msg(kind: Kind, seq: int = 0, flags: int = 0) -> Message:
    return Message(kind, seq=seq, flags=flags)


def test_wire_lose_drops_its_seq_and_drop_void_output_its_void():
    cfg = typed_cfg({"pp": 2, "faults.lose.rank": 1, "faults.lose.kind": "output"})
    (lose,) = RankFaults(cfg, 1).wire
    assert not lose.posting(None, 0, _msg(Kind.OUTPUT, seq=0))
    assert lose.posting(None, 0, _msg(Kind.OUTPUT, seq=1))
    assert lose.posting(None, 0, _msg(Kind.CHAIN, seq=0))
    assert RankFaults(cfg, 0).wire == []
    cfg = typed_cfg({"pp": 2, "faults.drop_void_output.enabled": True})
    (drop,) = RankFaults(cfg, 1).wire  # the last rank only
    assert drop.outgoing(None, 0, _msg(Kind.OUTPUT, flags=Flag.VOID)) is None
    m = _msg(Kind.OUTPUT)
    assert drop.outgoing(None, 0, m) is m
    assert RankFaults(cfg, 0).wire == []


def test_wire_delay_holds_its_kind_on_the_transport():
    cfg = typed_cfg(
        {"pp": 2, "faults.delay.kind": "proxy", "faults.delay.rank": -2, "faults.delay.s": 0.5}
    )
    held = []

    class Transport:
        def hold(self, s, label):
            held.append((s, label))

    class Ch:
        t = Transport()

    for rank in (0, 1):  # -2: every rank
        (delay,) = RankFaults(cfg, rank).wire
        assert delay.posting(Ch(), 1, _msg(Kind.CHAIN))
        assert delay.posting(Ch(), 1, _msg(Kind.PROXY))
    assert held == [(0.5, "faults.delay")] * 2
    one = typed_cfg({"pp": 2, "faults.delay.kind": "proxy", "faults.delay.rank": 1})
    assert RankFaults(one, 0).wire == [] and len(RankFaults(one, 1).wire) == 1


def test_the_delay_output_preset_holds_the_last_ranks_outputs():
    # the preset once named no rank, so `faults=delay_output` ran every message untouched
    from ppx_helpers import compose

    from ppx.validation import validate

    cfg = validate(compose("pp=3", "faults=delay_output"))
    held = []

    class Ch:
        class t:  # noqa: N801 - the transport a Sender holds
            @staticmethod
            def hold(s, label):
                held.append((s, label))

    (delay,) = RankFaults(cfg, 2).wire
    assert delay.posting(Ch(), 0, _msg(Kind.OUTPUT)) and held == [(0.02, "faults.delay")]


def test_cutover_epoch_desync_miscounts_the_first_cutover_only():
    cfg = typed_cfg({"pp": 2, "faults.epoch_desync.rank": 1})
    cut = RankFaults(cfg, 1).cutover
    assert [cut.extra_epochs(f) for f in range(3)] == [1, 0, 0]
    assert RankFaults(cfg, 0).cutover.extra_epochs(0) == 0


def test_run_level_pool_and_kill():
    cfg = typed_cfg({"pp": 3, "faults.pool.rank": 1, "faults.pool.tokens": 64})
    assert RunFaults(cfg).pool_sizes([4096] * 3) == [4096, 64, 4096]
    assert RunFaults(cfg).kill(3) is None
    cfg = typed_cfg({"pp": 3, "faults.kill.rank": 2, "faults.kill.after_s": 1.5})
    assert RunFaults(cfg).kill(3) == (2, 1.5)
    assert RunFaults(cfg).kill(2) is None  # no such rank: nobody is killed
    assert all(f.rank == RUN for f in active(cfg))


@pytest.mark.parametrize(
    "arg, line",
    [
        ("faults.nosuch.rank=1", "faults.nosuch.rank: no fault 'nosuch'; the faults: delay |"),
        ("faults.pool.token=3", "faults.pool.token: faults.pool has rank | tokens"),
        ("faults.pool_tokens=3", "faults.pool_tokens was renamed faults.pool.tokens"),
    ],
)
def test_an_unknown_fault_or_field_is_one_line_and_exit_2(arg, line, capsys):
    from ppx.config_renames import refuse_renamed

    refuse_renamed(["pp=2", "faults.pool.tokens=64", "faults.timing=fixed"])  # all known
    with pytest.raises(SystemExit) as e:
        refuse_renamed(["pp=2", arg])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert line in err and err.count("\n") == 1
