"""#791c's receive guard: a rank that excluded entries of a pass (retraction=partial) refuses
the proxy its upstream sent for that pass, naming rid / told / local (`engine.width_check=
retracted`), vs the row count alone, which names widths only (the fork's #631 ValueError, "126
row(s) for a batch of 22 token(s)") and lets a same-width divergence through.

The fork's tests (efschu/htsglang, test_pp_proxy_retracted_pass_mispair_791c.py): a retracted
pass refused by the guard; a retraction by another rank does not refuse (its test is
`retracted_by_rank == self`); a same-width divergence is still refused; an unretracted pass is
delivered unchanged. Units on the fork's state, both arms on the simulator at pp=2 and pp=3,
the green over real gloo processes under a deadline.
"""

from __future__ import annotations

import pytest
import torch
from ppx_helpers import GLOO_WATCH, SKEW_400, assert_refused, bare_steps, design, on_gloo

from ppx.core import Entry, Kind, Message, SlotBatch
from ppx.engine.loop import PassState

SIM = [
    "engine.transport=sim",
    "pp=2",
    "engine/ordering=decision_first",
    "engine/admission=decision",
    "engine.admission.retraction=partial",
    *SKEW_400,
]
GUARD = "engine.width_check=retracted"
ROWS = "engine.width_check=rows"

A, B = 51, 57  # the fork's honourable / unhonourable rids, renamed


class _Stopped(Exception):
    pass


class _Ctx:
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def stop(self, reason, p=None):
        raise _Stopped(reason)


def _check(width: str, rank: int, batch: SlotBatch, rows: int, fingerprint: list[int]):
    """What `rank`'s proxy receive does with `rows` rows for `batch`: True, or the stop."""
    check = design("engine.width_check", width)
    steps = bare_steps(_Ctx(rank), check)
    proxy = Message(
        Kind.PROXY,
        batch.slot,
        batch.pass_id,
        0,
        tensors=[torch.zeros(rows, 4), torch.tensor(fingerprint, dtype=torch.int64)],
    )
    try:
        return steps.check_proxy(PassState(batch.pass_id, batch.slot, batch=batch), proxy)
    except _Stopped as e:
        return str(e)


def _narrowed(excluded_by: int, extend: int = 22) -> SlotBatch:
    """Rank `excluded_by` dropped B (told 96, local 0) and runs A alone (the fork's 22 rows)."""
    b = SlotBatch(1, 40, "prefill", [Entry(A, 0, extend, True)])
    b.excluded = [[excluded_by, B, 96, 0]]
    return b


def test_a_retracted_pass_is_refused_by_name_where_the_row_count_names_widths():
    fork = [A, 22, B, 104]  # rank 0's batch: 22 + 104 = 126 rows
    assert _check("retracted", 1, _narrowed(1), 126, fork) == (
        f"#791c retracted pass: rank1 slot=1 pass=40 excluded rid={B} told=96 local=0 from the "
        "pass its upstream ran whole"
    )
    assert _check("rows", 1, _narrowed(1), 126, fork) == (
        f"proxy width check: rank1 slot=1 pass=40 rows=126 vs tokens=22; upstream batch [{A}, "
        f"{B}] vs local [{A}]"
    )


def test_a_same_width_divergence_after_a_partial_retraction_is_still_refused():
    # chunked prefill caps every chunk at one size: the narrowed batch can present the width
    # rank 0's wider batch had (16 rows of A here against 8 + 8 of A and B upstream)
    narrowed = _narrowed(1, extend=16)
    assert _check("rows", 1, narrowed, 16, [A, 8, B, 8]) is True  # red: delivered silently
    assert _check("retracted", 1, narrowed, 16, [A, 8, B, 8]).startswith(
        f"#791c retracted pass: rank1 slot=1 pass=40 excluded rid={B} told=96 local=0"
    )


def test_a_retraction_by_another_rank_does_not_refuse():
    rank1s = _narrowed(1)
    # rank 2 checks a batch whose exclusion rank 1 made: not its refusal; the rows decide
    assert _check("retracted", 2, rank1s, 22, [A, 22]) is True
    assert _check("retracted", 1, rank1s, 22, [A, 22]) is not True  # the same batch, rank 1


def test_an_unretracted_pass_is_delivered_unchanged():
    whole = SlotBatch(1, 40, "prefill", [Entry(A, 0, 22, True), Entry(B, 96, 104, True)])
    assert _check("retracted", 1, whole, 126, [A, 22, B, 104]) is True
    assert _check("retracted", 1, whole, 22, [A, 22]).startswith("proxy width check: rank1 ")


# -- end to end on the simulator ----------------------------------------------------------------
# the same pass on both arms: rank 1 excluded rid 4 (told 96, local 0) and ran rid 5 alone
STOPS = {
    "red: the row count names widths only": (
        ROWS,
        "proxy width check: rank1 slot=1 pass=23 rows=17 vs tokens=8; upstream batch [4, 5] "
        "vs local [5]",
    ),
    "green: the retracting rank refuses by rid, told, local": (
        GUARD,
        "#791c retracted pass: rank1 slot=1 pass=23 excluded rid=4 told=96 local=0 from the "
        "pass its upstream ran whole",
    ),
}


@pytest.mark.parametrize("width,reason", STOPS.values(), ids=STOPS.keys())
def test_sim_the_partial_retraction_stops_at_pass_23(engine, width, reason):
    s, _ = engine(*SIM, width)
    assert (s["verdict"], s["reason"]) == ("stopped", reason)
    assert (s["exclusions"], s["voids"]) == (1, 0)


def test_sim_pp3_only_the_retracting_rank_refuses(engine):
    # rank 2's pool is the short one: rank 1 ran pass 29 whole and passed its proxy on
    s, _ = engine(*SIM, "pp=3", "faults.pool.rank=2", GUARD)
    assert s["verdict"] == "stopped", s["reason"]
    assert s["reason"].startswith("#791c retracted pass: rank2 slot=2 pass=29 excluded rid=5 ")


def test_gloo_green_refuses_by_name_under_a_deadline(ppx_run):
    proc, s, _ = ppx_run(*on_gloo(SIM), GUARD, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "stopped", s["reason"]
    assert s["reason"].startswith("#791c retracted pass: rank1 ") and " told=" in s["reason"]


def test_refused_without_a_partial_retraction():
    # a whole-pass retraction voids the pass: no proxy is ever checked against it
    assert_refused(
        ["engine/admission=decision", GUARD],
        "engine.width_check=retracted needs engine.admission.retraction=partial",
    )
