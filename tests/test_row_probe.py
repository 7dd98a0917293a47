"""engine.admission.row_probe: a follower's decision row names a rid it cannot locate
(sgl-project#1180, boot weg1b7).

`faults.retract.rid=0`: rank 0 retracts request 0 rank-locally when its first token is in,
announces it on its next chain (followers let it go) and re-admits it at once, so its next
row names a rid no follower holds. `stop` stops there by name; `defer_clock` (before #1180)
re-arms the blocking chain hedge at every defer, and the second one waits on rank 0, which
waits on the output of the very pass the follower holds: wedged after 2 defers; `defer_laps`
(#1180) hedges once and stops by name after #944's cap of 3 probes, the frame still held.
With `faults.retract.redeliver=true` the next chain hop carries the rid again: both defers
serve (the hedge reads it), `stop` still stops.

The units below build the fork's own harness state (test_pp_row_defer_cap_1180.py: a
follower at pp_rank 1 of 3, slot 2, epoch 2, frame pass 157, row naming c25108f3, the
containers empty).
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from types import SimpleNamespace

import pandas as pd
import pytest
from ppx_helpers import assert_refused, design, on_gloo

from ppx.core import Entry, Flag, Kind, Message, StopRun
from ppx.engine.admission import codec
from ppx.engine.admission.probe import RowProbeStep
from ppx.protocol.row_probe import HORIZON_S

KEY = "engine.admission.row_probe"
RID, SLOT, FRAME = 0xC25108F3, 2, (157, 2)  # the specimen's rid, slot, (pass_ct, epoch)

SIM = [
    "pp=2",
    "model=micro",
    "engine.transport=sim",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "workload.num_requests=4",
    "workload.concurrency=2",
    "workload.max_new=4",
    "faults.retract.rid=0",
]
REDELIVER = [*SIM, "faults.retract.redeliver=true"]


def arm(name: str) -> str:
    return f"{KEY}={name}"


# -- the design: counts in probes, per slot, keyed by (frame, missing set) -------------------
def test_defer_laps_defers_cap_probes_then_stops_by_name_hedging_once():
    d = design(KEY, "defer_laps")
    assert d.cap == 3  # engine.guard.defer_cap: #944's UNRESOLVED_DEFER_CAP, one authority
    vs = [d.observe(1, SLOT, FRAME, [RID], 0.0) for _ in range(3)]
    assert [v.defer for v in vs] == [True] * 3  # cap inclusive
    assert [v.hedge for v in vs] == [True, False, False]  # the hedge on the first sighting only
    stop = d.observe(1, SLOT, FRAME, [RID], 0.0)
    assert not stop.defer and stop.occurrence == 4
    for term in ("#1180", f"slot {SLOT}", str(RID), "laps, not seconds"):
        assert term in stop.message
    assert "UNRESOLVED_DEFER_CAP" in stop.message and f"{KEY}=stop" in stop.message
    # a caller that swallowed the stop meets it again at once (the count is kept)
    assert not d.observe(1, SLOT, FRAME, [RID], 0.0).defer
    assert d.counters() == {"row_defers": 3, "row_hedges": 1}


def test_the_cap_is_engine_guard_defer_cap_and_zero_disables_it():
    d = design(KEY, "defer_laps", {"engine.guard.defer_cap": 5})
    assert [d.observe(1, 0, FRAME, [RID], 0.0).defer for _ in range(6)] == [True] * 5 + [False]
    off = design(KEY, "defer_laps", {"engine.guard.defer_cap": 0})
    assert all(off.observe(1, 0, FRAME, [RID], 0.0).defer for _ in range(1000))


def test_a_changing_missing_set_or_a_new_frame_restarts_the_count_per_slot():
    d = design(KEY, "defer_laps")
    for i in range(64):  # hops are landing: every probe names a different rid
        assert d.observe(1, SLOT, FRAME, [i], 0.0).defer
    d.observe(1, SLOT, FRAME, [RID], 0.0)
    d.observe(1, SLOT, FRAME, [RID], 0.0)
    v = d.observe(1, SLOT, (158, 2), [RID], 0.0)  # a new frame: its own count
    assert v.defer and v.occurrence == 1 and v.hedge
    assert d.observe(1, 7, FRAME, [RID], 0.0).occurrence == 1  # slots share no count
    d.clear(SLOT)  # a satisfied row forgets its slot only
    assert d.observe(1, SLOT, (158, 2), [RID], 0.0).occurrence == 1
    assert d.observe(1, 7, FRAME, [RID], 0.0).occurrence == 2


def test_red_defer_clock_defers_4096_times_in_one_instant_and_rearms_the_hedge_each_time():
    """The fork's `test_the_defer_is_not_unbounded` on the parent: 4096 tight probes take
    milliseconds, a 20 s horizon never lapses, and every one re-arms the blocking hedge."""
    d = design(KEY, "defer_clock")
    vs = [d.observe(1, SLOT, FRAME, [RID], 0.001 * i / 4096) for i in range(4096)]
    assert all(v.defer and v.hedge for v in vs) and vs[-1].occurrence == 4096
    late = d.observe(1, SLOT, FRAME, [RID], HORIZON_S + 1.0)  # only the clock ends it
    assert not late.defer and "horizon" in late.message


def test_stop_stops_at_the_first_sighting():
    v = design(KEY, "stop").observe(1, SLOT, FRAME, [RID], 0.0)
    assert not v.defer and v.message == f"decision names rid {RID} unknown to rank1 (pass 157)"


# -- the probe on a follower, the fork's harness state ------------------------------------
class _Ch:
    """A follower's channels: the decision's proxy frame and chain hops rank 0 posted."""

    def __init__(self, chains: int) -> None:
        self.held: dict = defaultdict(deque)
        self.wire = {Kind.PROXY: deque([Message(Kind.PROXY, SLOT, 157)])}
        self.wire[Kind.CHAIN] = deque(Message(Kind.CHAIN, -1, 158 + i) for i in range(chains))
        self.recvs: list[Kind] = []
        sent = defaultdict(int, {(0, Kind.CHAIN): chains})
        self.board = SimpleNamespace(
            peer_sent=lambda src, kind: sent[(src, kind)], consumed=defaultdict(int)
        )

    def recv(self, src, kind, slot=-1, pass_id=-1, width=-1):
        if self.held[(src, int(kind))]:
            return self.held[(src, int(kind))].popleft()
        if not self.wire[kind]:
            raise AssertionError(f"a blocking {kind.label} receive nobody answers")
        self.recvs.append(kind)
        self.board.consumed[src, kind] += 1
        return self.wire[kind].popleft()

    def hold(self, src, msg):
        self.held[(src, int(msg.kind))].append(msg)


def _follower(name: str, chains: int = 3):
    ch = _Ch(chains)
    sched = SimpleNamespace(reqs={}, add=lambda reqs: None)  # waiting, chunked, running empty
    stops: list[str] = []

    def stop(reason, p=None):
        stops.append(reason)
        raise StopRun(reason)

    ctx = SimpleNamespace(
        rank=1, prev=0, epoch=2, ch=ch, sched=sched, stop=stop,
        t=SimpleNamespace(now=lambda: 0.0, sleep=lambda s: None),
        events=SimpleNamespace(emit=lambda *a, **k: None),
    )  # fmt: skip
    entries = [Entry(RID, 0, 1, True)]
    dec = Message(Kind.DECISION, SLOT, 157, 2, flags=Flag.HAS_ENTRIES)
    dec.tensors = [codec.encode(entries)]
    p = SimpleNamespace(pass_id=157, slot=SLOT, decision=dec)
    return RowProbeStep(ctx, design(KEY, name)), p, ch, stops


def test_green_the_stop_leaves_the_frame_held_and_the_hedge_read_one_hop():
    step, p, ch, stops = _follower("defer_laps")
    with pytest.raises(StopRun, match="#1180"):
        step.hold_until_locatable(p)
    assert len(ch.held[(0, int(Kind.PROXY))]) == 1  # the frame: taken off the wire, not run
    # one blocking hop on the first sighting; the repeats read only hops already posted
    assert ch.recvs == [Kind.PROXY, Kind.CHAIN, Kind.CHAIN, Kind.CHAIN]
    assert step.design.counters() == {"row_defers": 3, "row_hedges": 1}


def test_red_defer_clock_blocks_on_a_hop_after_every_defer():
    step, p, ch, _ = _follower("defer_clock", chains=2)
    with pytest.raises(AssertionError, match="a blocking chain receive nobody answers"):
        step.hold_until_locatable(p)  # hop 3 is never posted: rank 0 waits on our output
    assert step.design.counters() == {"row_defers": 3, "row_hedges": 3}


def test_a_rid_that_lands_with_a_hop_is_run():
    step, p, ch, stops = _follower("defer_laps")
    step.ctx.sched.add = lambda reqs: step.ctx.sched.reqs.setdefault(RID, object())
    step.hold_until_locatable(p)
    assert stops == [] and step.design.seen == {}  # the count of the slot is forgotten


# -- end to end on the simulator ------------------------------------------------------------
def _defers(run_dir: str) -> int:
    ev = pd.read_parquet(os.path.join(run_dir, "events.parquet"))
    return int((ev.kind == "row_defer").sum())


def test_red_defer_clock_wedges_on_the_output_rank0_waits_for(engine):
    s, d = engine(*SIM, arm("defer_clock"))
    assert s["verdict"] == "wedged", s
    assert s["cycle"] == "rank0 -[recv output slot=1]-> rank1 -[recv chain]-> rank0", s
    assert _defers(d) == 2  # the second hedge is the receive nobody answers


def test_green_defer_laps_stops_by_name_after_three_probes(engine):
    s, d = engine(*SIM)  # the default design
    assert s["verdict"] == "stopped" and s["choices"]["row_probe"] == "defer_laps", s
    assert s["reason"].startswith("#1180 row defer past its lap cap: rank1 slot 1 ")
    assert "for 4 consecutive probes (cap 3" in s["reason"] and "rids=[0]" in s["reason"]
    assert s["row_defers"] == 3 and s["row_hedges"] == 1 and _defers(d) == 3


def test_stop_stops_at_once(engine):
    s, _ = engine(*SIM, arm("stop"))
    assert (
        s["verdict"] == "stopped"
        and s["reason"] == "decision names rid 0 unknown to rank1 (pass 3)"
    )


@pytest.mark.parametrize("name", ["defer_clock", "defer_laps"])
def test_a_rid_that_reappears_on_the_next_hop_is_served(engine, name):
    s, _ = engine(*REDELIVER, arm(name))
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s
    assert s["row_defers"] == 1 and s["row_hedges"] == 1
    stopped, _ = engine(*REDELIVER, arm("stop"))
    assert stopped["verdict"] == "stopped"


def test_gloo_red_defer_clock_wedges(ppx_run):
    proc, s, _ = ppx_run(*on_gloo(SIM), arm("defer_clock"), "watch.max_run_s=60", "watch.stall_s=3")
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "wedged", s["reason"]
    assert "rank1 -[recv chain]-> rank0" in s["cycle"]


def test_refusals():
    assert_refused(
        ["engine.admission.row_probe=stop"],
        "engine.admission.row_probe=stop means nothing: engine/admission=rank_local",
    )
    assert_refused(["faults.retract.rid=0"], "faults.retract.rid=0: a row naming a retracted rid")
    # crashed before (the TP phase meets the retracted rid with no row probe): refused now
    assert_refused(
        [
            "engine/admission=decision",
            "engine/ordering=decision_first",
            "faults.retract.rid=0",
            "flip=every_40_passes",
        ],
        "faults.retract.rid=0 with flips: the retraction fault is modelled in the PP phase only",
    )
    assert_refused(
        [
            "engine/admission=decision",
            "engine/ordering=decision_first",
            "faults.retract.redeliver=true",
        ],
        "faults.retract.redeliver=true means nothing without faults.retract.rid",
    )
