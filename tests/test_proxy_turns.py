"""A proxy is pulled in its own pass or never (ppx/engine/proxy_turns.py).

The default design (engine/admission=rank_local) with a host tier and flips: every cutover
sends the tree to the host, and each rank's re-admission waits for its own load-back, which
lands at a different pass on each rank (on the simulator even with equal `prefetch_ms`).
One rank then forms a batch for a slot whose upstream formed none, or the other way round:
rank-local admission diverging by design (the #791 red). Before, the proxy receive (or the
upstream's flush) waited for good and the run ended an opaque `wedged` ("no task can run:
deadlock" on the simulator; on gloo "every rank blocked"); now the rank that reads the
evidence stops by name, as the proxy width check stops a proxy whose rows differ.
Red: the evidence switched off (the code before), wedged. Green: stopped, named.
"""

from __future__ import annotations

import pytest

from ppx.core import Flag, Kind, Message, StopRun
from ppx.engine.proxy_turns import NeverPulled, NeverSent, ProxyTurns

# the explorer's find (docs/simulation.md, rank_local with a continuation per slot drawn):
# rank 0's load-back is 20 ms, ranks 1 and 2 land theirs at once
HOST = [
    "pp=3", "model=hash", "engine.max_reqs=8", "engine.kv.pool_tokens=256",
    "workload.num_requests=2", "workload.num_prefixes=1", "workload.prefix_len=24",
    "workload.prompt_min=11", "workload.prompt_max=13", "workload.concurrency=2",
    "engine.chunk_size=16", "engine.max_batch=1", "engine.kv.host_tier=true",
    "flip.enabled=true", "flip.every_s=0.0", "flip.every_passes=7", "flip.max_flips=4",
]  # fmt: skip
FOUND = [
    *HOST, "workload.max_new=3", "engine.kv.prefetch_ms=[20.0,0.0,0.0]", "flip.inflight=void",
    "flip.continuation=survive", "flip.due=clock", "engine.admission.continuations=per_slot",
]  # fmt: skip
# rank 1's load-back slow instead, and the flip defaults: rank 0 forms the batch, rank 1 not
SLOW_RANK1 = [*HOST, "workload.max_new=10", "engine.kv.prefetch_ms=[0.0,20.0,0.0]"]
SIM = "engine.transport=sim"

NEVER_SENT = (
    "proxy width check: rank1 slot=0 pass=21 rows=0 vs tokens=2; upstream batch [] vs local "
    "[0] (rank0 sent its chain of pass 22 and no proxy of pass 21: it formed no batch for the "
    "slot)"
)
NEVER_PULLED = (
    "proxy width check: rank1 slot=2 pass=20 rows=2 vs tokens=0; rank0 sent a proxy of pass "
    "20 and rank1 ran that pass with no batch for the slot"
)


def _msg(kind: Kind, pass_id: int, flags: int = 0) -> Message:
    return Message(kind, pass_id % 3, pass_id, 0, flags=flags)


# -- the component ---------------------------------------------------------------------------
def test_the_proxy_of_the_pass_awaited_is_no_evidence():
    t = ProxyTurns(rank=1)
    t.turn = 4
    t.proxy_in(0, 5, _msg(Kind.PROXY, 5), rows=3)
    t.stashed(0, _msg(Kind.CHAIN, 5), 0, waiting=5)  # this pass's chain, read late
    t.stashed(0, _msg(Kind.PROXY, 5), 3, waiting=None)  # pulled at this pass's launch


def test_a_later_chain_while_waiting_proves_the_proxy_never_sent():
    t = ProxyTurns(rank=1)
    with pytest.raises(NeverSent) as e:
        t.stashed(0, _msg(Kind.CHAIN, 6), 0, waiting=5)
    assert str(e.value) == "rank0 sent its chain of pass 6 and no proxy of pass 5"
    assert e.value.width_check(1, 2, 7, [3]).startswith(
        "proxy width check: rank1 slot=2 pass=5 rows=0 vs tokens=7; upstream batch [] vs "
        "local [3] (rank0 sent its chain of pass 6"
    )
    t.stashed(0, _msg(Kind.CHAIN, 6), 0, waiting=None)  # not waiting on a proxy: nothing
    with pytest.raises(NeverSent):  # a proxy of a later pass: this one was skipped
        t.proxy_in(0, 5, _msg(Kind.PROXY, 8), rows=3)


def test_a_proxy_of_a_pass_run_without_it_is_never_pulled():
    t = ProxyTurns(rank=2)
    t.turn = 5
    with pytest.raises(NeverPulled) as e:
        t.stashed(1, _msg(Kind.PROXY, 5), 4, waiting=None)
    assert str(e.value) == (
        "proxy width check: rank2 slot=2 pass=5 rows=4 vs tokens=0; rank1 sent a proxy of "
        "pass 5 and rank2 ran that pass with no batch for the slot"
    )
    with pytest.raises(NeverPulled, match="pass=5 a void vs tokens=0"):
        t.stashed(1, _msg(Kind.PROXY, 5, Flag.VOID), 1, waiting=None)
    with pytest.raises(NeverPulled):  # taken by a later receive: not its proxy either
        t.proxy_in(1, 8, _msg(Kind.PROXY, 5), rows=4)
    t.stashed(1, _msg(Kind.PROXY, 6), 4, waiting=None)  # a pass not reached yet: its own
    assert issubclass(NeverPulled, StopRun) and issubclass(NeverSent, StopRun)


# -- the simulator: the explorer's find, red and green -----------------------------------------
def _before(monkeypatch) -> None:
    """The code before: no header is evidence; a receive waits for whatever comes."""
    for name in ("proxy_in", "stashed"):
        monkeypatch.setattr(ProxyTurns, name, lambda self, *a, **k: None)


def test_red_without_the_evidence_the_divergence_is_an_opaque_wedge(engine, monkeypatch):
    _before(monkeypatch)
    s, _ = engine(*FOUND, SIM)
    assert s["verdict"] == "wedged" and s["reason"].startswith("no task can run: deadlock"), s
    s, _ = engine(*SLOW_RANK1, SIM)
    assert s["verdict"] == "wedged", s
    assert s["cycle"] == "rank0 -[flush proxy]-> rank1 -[recv chain slot=0]-> rank0", s


def test_green_the_rank_that_reads_the_evidence_stops_by_name(engine):
    s, _ = engine(*FOUND, SIM)
    assert s["verdict"] == "stopped" and s["reason"] == NEVER_SENT, s
    assert s["oracle_mismatches"] == 0 and not s.get("cycle"), s
    s, _ = engine(*SLOW_RANK1, SIM)
    assert s["verdict"] == "stopped" and s["reason"] == NEVER_PULLED, s
    assert s["oracle_mismatches"] == 0 and not s.get("cycle"), s


def test_green_a_design_whose_ranks_agree_serves_the_same_load(engine):
    """rank 0's decision travels: no rank forms a batch its upstream did not."""
    s, _ = engine(*FOUND, SIM, "engine/admission=decision", "engine/ordering=decision_first")
    assert s["verdict"] == "served" and s["served"] == 2 and s["oracle_mismatches"] == 0, s


# -- beside it: the TP phase's admissions reported at their own pass --------------------------
def _tp_admits(run_dir: str) -> list[tuple[int, int, int]]:
    """(rank, rid, pass) of every `admit` event inside a TP phase (flip_end 'now tp' to the
    next flip_start), read off the run's events."""
    import os

    import pandas as pd

    ev = pd.read_parquet(os.path.join(run_dir, "events.parquet")).sort_values(["rank", "t_s"])
    out, tp = [], {}
    for e in ev.itertuples():
        if e.kind == "flip_end":
            tp[e.rank] = str(e.detail).startswith("now tp")
        elif e.kind == "flip_start":
            tp[e.rank] = False
        elif e.kind == "admit" and e.pass_id >= 0:
            out.append((int(e.rank), int(e.rid), int(e.pass_id), tp.get(e.rank, False)))
    return [(r, rid, p) for r, rid, p, in_tp in out if in_tp]


def test_red_tp_admits_unreported_in_their_phase_surface_at_the_next_pp_pass(engine, monkeypatch):
    from ppx.engine.moves import Moves

    real = Moves.report_admits

    def pp_only(self, *a):  # the code before: only the PP phase's steps reported admits
        import sys

        if sys._getframe(1).f_code.co_name != "run_pass":
            real(self, *a)

    monkeypatch.setattr(Moves, "report_admits", pp_only)
    _, d = engine(*FOUND, SIM)
    assert _tp_admits(d) == []  # rids 1 and 0 admitted at TP passes 10 and 13: reported later


def test_green_tp_admits_are_reported_at_their_pass_on_every_rank(engine):
    _, d = engine(*FOUND, SIM)
    assert sorted(_tp_admits(d)) == [(r, rid, p) for r in range(3) for rid, p in ((0, 13), (1, 10))]
