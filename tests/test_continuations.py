"""More than one resident continuation per rank: sgl-project#798 in the fork's shape, and
sgl-project#959's second continuation minted after a PP->TP flip.

`engine.admission.continuations=per_slot` lets each slot hold and continue its own request
mid-prefill while ONE scheduler-wide pointer (the fork's `chunked_req`) names whichever slot
wrote last. #798: a slot-blind reconcile (`reconcile=scheduler`) reads that pointer, a miss
is read as a measurement (`miss=zero`: the fork's `local=0`), the pass is retracted, and the
retracting rank's own void (`void_relay=first_retracting`, #797's pp_void_forward_payload)
keeps the request (`void=keep`) and restores the pointer from its slot's snapshot -- which
makes the other slot's next reconcile miss. #959: a cutover that lets continuations survive
un-retracted (`flip.continuation=survive`, their KV carried) leaves the one-slot TP plan with
continuations no cell names; TP admission then mints a second (`second_continuation=mint`:
the fork's `assert self.chunked_req is None`) unless the #959 guard (`refuse`) makes the
fresh admission wait and the resident continue.
"""

from __future__ import annotations

import ast

import pytest
from ppx_helpers import assert_refused, design, on_gloo, upstream_rule

from ppx.core import UNRESOLVED, Entry, Req, SlotBatch, StopRun
from ppx.engine.admission.prefill import LocalPrefill
from ppx.engine.cache.kv import KVCache
from ppx.engine.scheduler import Scheduler

# the fork's harness (test_pp_reconcile_slot_blind_798.py), told scaled from 98304 to 96
STUCK, OTHER, TOLD, CHUNK = 0x48ABBC0E, 0xF6116BA2, 96, 16


def _sched(slots: int, per_slot: bool = True) -> Scheduler:
    return Scheduler(KVCache(1, 1024, 1, 2, 8, 256), slots, CHUNK, 1, per_slot=per_slot)


def _chunk(s: Scheduler, slot: int, req: Req, pass_id: int) -> None:
    """One pass of `slot` placing and computing the next chunk of `req` (rank 0's row)."""
    s.snapshot_chunked(slot)
    e = s.admit_entry(req, req.computed, CHUNK)
    s.after_launch(s.place([e], slot, pass_id, "prefill"))
    s.inflight[slot] = None  # a middle chunk's output samples nothing


def _boot_798() -> tuple[Scheduler, Req, Req]:
    """A follower of pp=3: slot 2 holds STUCK at 96 tokens, slot 0 holds OTHER at 16, and
    slot 0 wrote the pointer last (`chunked_req=OTHER`, before_by_slot=[OTHER, None, STUCK])."""
    s = _sched(3)
    stuck, other = Req(STUCK, list(range(1, 201)), 4), Req(OTHER, list(range(300, 400)), 4)
    s.add([stuck, other])
    for i in range(TOLD // CHUNK):
        _chunk(s, 2, stuck, 3 * i + 2)
    _chunk(s, 0, other, 3 * TOLD // CHUNK)
    assert (s.chunked, s.cells) == (other, [other, None, stuck])
    return s, stuck, other


def test_the_slot_blind_reconcile_reads_another_slots_continuation_as_local_zero():
    s, stuck, _ = _boot_798()
    e = Entry(STUCK, TOLD, CHUNK, False, continues=True)  # the decision for mb_id 2
    s.snapshot_chunked(2)
    blind = design("engine.admission.reconcile", "scheduler")
    assert blind.missed(s, stuck, e, True)  # the pointer names OTHER: a miss ...
    local = design("engine.guard.miss", "zero").read(UNRESOLVED)
    assert local == 0  # ... reported as the specimen's `told=98304 local=0`, holding 96
    slot = design("engine.admission.reconcile", "slot")
    assert slot.held_chunked(s, stuck, True) and not slot.missed(s, stuck, e, True)
    assert stuck.computed == TOLD  # the slot's own request answers: nothing to retract


def test_own_voids_that_keep_restore_the_other_slots_pointer_slots_alternate():
    """The loop: each own-void restores ITS slot's continuation, which is what the other
    slot's next reconcile misses. The told never moves (kept, parked where it was)."""
    s, stuck, other = _boot_798()
    blind, keep = (
        design("engine.admission.reconcile", "scheduler"),
        design("engine.admission.void", "keep"),
    )
    seen = []
    for n, (slot, req) in enumerate([(2, stuck), (0, other)] * 3):
        s.snapshot_chunked(slot)
        e = Entry(req.rid, req.computed, CHUNK, False, continues=True)
        missed = blind.missed(s, req, e, True)
        seen.append((slot, req.rid, e.prefix_len, 0 if missed else req.computed))
        void = SlotBatch(slot, 100 + n, "prefill", [e], voided=True, placed=False)
        void.incarnation = {req.rid: req.admit_seq}
        keep.void(s, void)  # the retracting rank empties its slot itself (first_retracting)
        assert s.chunked is req  # ... and restores its own slot's snapshot
    assert seen == [(2, STUCK, TOLD, 0), (0, OTHER, CHUNK, 0)] * 3
    assert keep.kept == 6 and s.waiting == type(s.waiting)()  # "released 0 of 1" every time


# -- #959: one cell in the TP plan ------------------------------------------------------------
class _Loop:
    def __init__(self, sched):
        self.sched = sched


def _tp_after_the_cutover(resident: bool) -> tuple[Scheduler, LocalPrefill, Req, Req]:
    """The TP plan's scheduler: its one cell empty, a continuation carried un-retracted with
    no cell (resident: 32 of 100 computed), a fresh 80-token request waiting."""
    s = _sched(1)
    carried, fresh = Req(1, list(range(1, 101)), 4), Req(3, list(range(200, 280)), 4)
    s.add([carried, fresh])
    if resident:
        s.cache.admit(carried, 0, s.need_of(carried, 0))
        s.waiting.remove(carried)
        s.cache.extend(carried, 32)
        s.cache.commit(carried)
    return s, upstream_rule(_Loop(s)), carried, fresh


def _guarded(name: str, resident: bool = True):
    s, pol, carried, fresh = _tp_after_the_cutover(resident)
    pol.second = design("engine.admission.second_continuation", name)
    return s, pol, carried, fresh


def test_red_without_the_guard_a_second_continuation_is_minted_and_named():
    s, pol, carried, fresh = _guarded("mint")
    assert s.strays() == [carried] and s.cont() is None  # the precondition is reachable
    with pytest.raises(StopRun) as e:
        pol.form(0, 0)
    assert str(e.value).startswith(
        "#959 second continuation: rid 3 minted as a continuation while rid 1 (computed 32 "
        "of 100) is resident mid-prefill -- the fork's `assert self.chunked_req is None`"
    )


def test_green_the_fresh_request_waits_and_the_resident_continues_untouched():
    s, pol, carried, fresh = _guarded("refuse")
    b = pol.form(0, 0)
    assert [(e.rid, e.prefix_len, e.extend_len, e.continues) for e in b.entries] == [
        (1, 32, CHUNK, True)  # no re-prefill of what it computed
    ]
    assert fresh in s.waiting and s.cells == [carried]  # left for a later pass, not lost
    assert pol.second.counters() == {"second_continuation_refusals": 1}


def test_the_guard_does_not_fire_when_nothing_is_resident_and_is_the_default():
    s, pol, _, fresh = _guarded("refuse", resident=False)
    b = pol.form(0, 0)
    assert b.entries[0].rid == 1 and s.cont().rid == 1  # the queue's head is chunked as ever
    assert pol.second.counters() == {"second_continuation_refusals": 0}
    from ppx.protocol.registry import default

    assert default("engine.admission.second_continuation") == "refuse"
    assert default("engine.admission.continuations") == "one"


# -- end to end on the simulator --------------------------------------------------------------
# pp=3, seed 46: prompts of 66, 9 and 44 tokens, one request per batch, chunks of 16: slots 0
# and 2 hold continuations, slot 1 decodes the short one
B798 = [
    "pp=3",
    "seed=46",
    "model=micro",
    "engine.transport=sim",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "workload=long_prompt",
    "workload.num_requests=3",
    "workload.concurrency=3",
    "workload.prompt_min=8",
    "workload.prompt_max=80",
    "workload.max_new=4",
    "engine.chunk_size=16",
    "engine.max_batch=1",
    "engine.liveness.livelock_passes=24",
    "engine.admission.void=keep",
    "engine.guard.miss=zero",
    "engine.ordering.void_relay=first_retracting",
]
PER_SLOT = "engine.admission.continuations=per_slot"
BLIND = "engine.admission.reconcile=scheduler"
SHAPE_798 = (
    "(rid, told, local) repeating: [(0, 16, 0), (2, 16, 0)]; "
    "voided slots (last 8): [2, 0, 2, 0, 2, 0, 2, 0]"
)


def test_798_red_per_slot_and_slot_blind_livelock_in_the_forks_shape(engine):
    s, _ = engine(*B798, PER_SLOT, BLIND)
    assert s["verdict"] == "livelocked" and s["reason"].endswith(SHAPE_798), s
    assert s["void_kept"] > 0 and s["served"] == 1  # the short request in slot 1 only


def test_798_green_the_slots_own_continuation_answers(engine):
    s, _ = engine(*B798, PER_SLOT)
    assert s["verdict"] == "served" and s["voids"] == 0 and s["oracle_mismatches"] == 0, s


def test_798_one_continuation_per_rank_cannot_alternate(engine):
    s, _ = engine(*B798, BLIND)  # the same slot-blind lookup: one pointer is one continuation
    assert s["verdict"] == "served" and s["voids"] == 0, s


B959 = [
    *B798[:8],
    "workload.num_requests=6",
    "workload.concurrency=6",
    "workload.prompt_min=40",
    "workload.prompt_max=90",
    "workload.max_new=4",
    "engine.chunk_size=16",
    "engine.max_batch=1",
    PER_SLOT,
    "flip=every_40_passes",
    "flip.every_passes=5",
    "flip.max_flips=1",
    "flip.inflight=drain",
    # the stopwatch flip (the #959 specimen: "PHASE-FLIP armed ... but NOT QUIESCENT: a
    # chunked prefill is incomplete"); flip.due=drained would wait for the continuations
    "flip.due=clock",
]
SURVIVE = "flip.continuation=survive"
MINT = "engine.admission.second_continuation=mint"


def test_959_red_a_survivor_and_a_fresh_mint_stop_by_the_forks_assert(engine):
    s, _ = engine(*B959, SURVIVE, MINT)
    assert s["verdict"] == "stopped" and s["carried_at_flip"] == 3, s
    assert s["reason"].startswith(
        "#959 second continuation: rid 3 minted as a continuation while rid 0 (computed 32 of 69)"
    )


def test_959_green_the_resident_continues_and_the_run_serves(engine):
    s, _ = engine(*B959, SURVIVE)
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s
    assert s["carried_at_flip"] == 3 and s["second_continuation_refusals"] == 2, s
    retract, _ = engine(*B959)  # ppx's cutover re-queues every continuation
    assert retract["verdict"] == "served" and retract["retracted_at_flip"] == 3
    assert retract["carried_at_flip"] == 0


def test_gloo_reds_798_livelock_and_959_stop(ppx_run):
    proc, s, _ = ppx_run(*on_gloo(B798), PER_SLOT, BLIND, "watch.max_run_s=60", name="r798")
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "livelocked" and "[(0, 16, 0), (2, 16, 0)]" in s["reason"], s
    # two slots alternate (which two depends on when the short request arrived: real time)
    slots = ast.literal_eval(s["reason"].rsplit("voided slots (last 8): ", 1)[1])
    assert len(set(slots)) == 2 and all(a != b for a, b in zip(slots, slots[1:])), slots
    proc, s, _ = ppx_run(*on_gloo(B959), SURVIVE, MINT, "watch.max_run_s=60", name="r959")
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "stopped" and s["reason"].startswith("#959 second continuation"), s


def test_refusals():
    assert_refused(["pp=1", PER_SLOT], "engine.admission.continuations=per_slot needs pp >= 2")
    assert_refused([SURVIVE], "flip.continuation=survive means nothing without flips")
    assert_refused([MINT], "engine.admission.second_continuation=mint means nothing with")
