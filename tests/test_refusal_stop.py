"""sgl-project#1153: a forwarded schedule a follower cannot execute is a group STOP that names
what rank 0 told it and what it reached, `told=[a,b] reached=[a]` (sorted, comma-separated, no
spaces: the literal the log's boot-3 acceptance grep anchors on), never a rank-local void.

The old handler (`_pp_refuse_forwarded_schedule`, deleted by #1153) voided the follower's own
slot only and sent no proxy; nothing carried the void upstream (the #797 return trip had no
call sites after CUT V, #1072 deleted the void relay), so rank 0's blocking receive took the
last rank's NEXT output under this slot's label: one output ahead (boot_855 line 65119). ppx
reaches it with `engine/admission=forwarded engine.admission.on_refusal=void
engine.ordering.void_relay=downstream` at pp=3, rank 1 refusing.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

from ppx_helpers import GLOO_WATCH, on_gloo, typed_cfg

from ppx.core import SEATS_SHORT, Entry
from ppx.engine.admission.follow import Follower
from ppx.protocol.registry import Protocol


def _follower(**settings) -> Follower:
    cfg = typed_cfg(
        {"pp": 3, "engine.admission.name": "forwarded", "engine.admission.on_refusal": "stop"}
        | settings
    )
    return Follower(SimpleNamespace(rank=1), Protocol(cfg), {})


def test_the_stop_names_told_and_reached_sorted_no_spaces():
    f = _follower()
    p = SimpleNamespace(slot=0, pass_id=24)
    told = [Entry(10, 0, 32, True), Entry(9, 24, 8, True)]
    reason = f.stop_reason(p, told, [[1, 10, 0, 5]])
    assert reason == (
        "forwarded refusal (on_refusal=stop): rank1 slot=0 pass=24 told=[9,10] reached=[9]: "
        "cannot execute rid=10 prefix_len=0 (local 5)"
    )
    both = f.stop_reason(p, told, [[1, 9, 24, 0], [1, 10, 0, 5]])
    assert "told=[9,10] reached=[]: cannot execute rid=9 prefix_len=24 (local 0), rid=10" in both


def test_the_seat_note_is_kept():
    f = _follower(**{"engine.admission.follower_seats": "veto"})
    f.seats.note = "rank1 reached 1 of the 2 rids rank 0 named (seat count: ...)"
    p = SimpleNamespace(slot=0, pass_id=24)
    reason = f.stop_reason(p, [Entry(9, 0, 8, True), Entry(10, 0, 8, True)], [[1, 10, 0, -3]])
    assert -3 == SEATS_SHORT and reason.endswith(
        "told=[9,10] reached=[9]: cannot execute rid=10 prefix_len=0 (local -3); rank1 reached "
        "1 of the 2 rids rank 0 named (seat count: ...)"
    )


# pp=3, rank 1's 400-token pool evicts shared prefixes; four requests at a time, so a decision
# names two rids and rank 1 can run only one of them
HOP = [
    "pp=3",
    "model=micro",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    "engine/admission=forwarded",
    "faults=pool_skew",
    "faults.pool.tokens=400",
    "workload.num_prefixes=4",
    "workload.num_requests=10",
    "workload.concurrency=4",
    "workload.max_new=6",
    "engine.liveness.livelock_passes=32",
]
OLD_HANDLER = ["engine.admission.on_refusal=void", "engine.ordering.void_relay=downstream"]
AHEAD = re.compile(
    r"output mismatch: rank0 slot=(\d) got pass=(\d+) width=1 vs local pass=(\d+) finals=2"
)


def test_red_the_old_handler_runs_one_output_ahead_green_stop_names_told_and_reached(engine):
    red, _ = engine(*HOP, *OLD_HANDLER)
    # one void: the follower's own (its rank-local void of the slot), which nothing carried
    # to rank 0 -- rank 0's count is 0 (per_rank), the group's is the follower's
    assert red["verdict"] == "stopped" and red["per_rank"]["voids"] == [0, 1, 1], red["reason"]
    # rank 0 took pass 25's output (the last rank's next one) for slot 2's pass 23
    assert (
        red["reason"]
        == "output mismatch: rank0 slot=2 got pass=25 width=1 vs local pass=23 finals=2"
    )
    green, _ = engine(*HOP, "engine.admission.on_refusal=stop")
    assert green["verdict"] == "stopped" and green["voids"] == 0
    assert green["reason"] == (
        "forwarded refusal (on_refusal=stop): rank1 slot=2 pass=23 told=[4,5] reached=[4]: "
        "cannot execute rid=5 prefix_len=96 (local 20)"
    )


def test_gloo_red_the_old_handler_wedges_the_output_ring(ppx_run):
    proc, s, _ = ppx_run(*on_gloo(HOP), *OLD_HANDLER, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    m = AHEAD.fullmatch(s["reason"])
    assert s["verdict"] == "stopped" and m is not None, s["reason"]
    assert int(m.group(2)) > int(m.group(3)), s["reason"]  # a later pass's output, this label
