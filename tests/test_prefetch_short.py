"""sgl-project#1175, a group floor that completed short of what rank 0 wants (a follower's load
terminated with 16 of a 24-token prefix: `fold({1: (0, 16)})`): ppx clamps to 16 at once
(`engine.admission.prefetch.short=clamp`), the fork defers by name until the length-priced
bound and clamps then (`defer`). The arithmetic on `decide` and on a carrier built the way
rank 0 builds it, with its clock; the refusals.
"""

from __future__ import annotations

from ppx_helpers import HOST_PREFETCH, assert_refused, design

from ppx.protocol.prefetch_carrier import Carrier, decide, fold

SHORT = fold({1: (0, 16), 2: (24, 0)}, [1, 2])  # COMPLETE: rank 1 holds 16, rank 2 all 24
COVERED = fold({1: (0, 24), 2: (24, 0)}, [1, 2])


def test_clamp_tells_the_short_floor_at_once():
    v = decide(24, SHORT, 3, expired=False)
    assert (v.action, v.prefix, v.why) == ("clamp", 16, "group floor 16 < want 24")


def test_defer_waits_the_bound_by_name_then_clamps_to_the_same_floor():
    v = decide(24, SHORT, 3, expired=False, short_defers=True)
    assert (v.action, v.why) == ("defer", "group floor 16 < want 24")
    v = decide(24, SHORT, 3, expired=True, short_defers=True)
    assert (v.action, v.prefix) == ("clamp", 16)
    assert decide(24, COVERED, 3, expired=False, short_defers=True).action == "admit"


def test_rank0s_carrier_counts_defers_until_the_bound_under_the_forks_design():
    for name, actions in (("clamp", ["clamp"]), ("defer", ["defer", "defer", "clamp"])):
        carrier = Carrier(0, 3, bound_s=1.0)
        carrier.short_defers = design("engine.admission.prefetch.short", name).defers
        seen = []
        for now in (0.0, 0.5, 1.0):
            carrier.absorb((7, *SHORT))  # every lap brings the same terminated numbers back
            v = carrier.admit(7, 24, now)
            seen.append(v.action)
            if v.action != "defer":
                assert v.prefix == 16
                break
        assert seen == actions, (name, seen)
        assert carrier.n["prefetch_clamped"] == 1
        assert carrier.n["prefetch_deferred"] == len(actions) - 1


def test_defer_is_refused_where_no_group_floor_folds():
    assert_refused(
        [
            "pp=2",
            *HOST_PREFETCH,
            "engine.admission.prefetch.floor=rank0",
            "engine.admission.prefetch.short=defer",
        ],
        "engine.admission.prefetch.short=defer needs a group floor",
    )
    assert_refused(
        ["engine.admission.prefetch.short=defer"],
        "engine.admission.prefetch.short=defer needs the group floor's carrier",
    )
