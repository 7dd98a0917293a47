"""engine.guard.defer_streak: what the per-rid unresolved streak of the #944 cap is keyed on.

- `refusal` (default, sgl-project#987 Part A): the streak counts the rid's unresolved reports
  whatever rank 0 offered; it survives a changed offer and the escalation (told=0) holds until
  the rid is served.
- `offer` (the #944 era): the streak is keyed on rank 0's offer (`note_offer`); a different
  told restarts it, and an unresolved report on a told<=0 offer is exempt (never counted).

Boot 7 of the log: rank 0 alternated offers for one rid, every change restarted the streak and
it never reached the cap (506 of 513 refusals one rid, 1 termination in 506 laps). Here
`faults=offer_flap` makes rank 0's match for a rid lose 7 tokens after each void of it and
regain them after the next (offers 31 / 24), while rank 1's host-tier load-back is slow enough
that every offer is unresolved. Sim transport (deterministic), one red arm over real gloo.
"""

from __future__ import annotations

import os
import re

import pandas as pd
import pytest
from ppx_helpers import (
    GLOO_WATCH,
    SHORT_PREFIXES,
    assert_refused,
    compose,
    make_guard,
    on_gloo,
)

from ppx.core import UNRESOLVED
from ppx.protocol.guard.guard import Guard

SIM = ["pp=2", "engine.transport=sim", "engine/ordering=decision_first"]
FLAP = [
    *SIM,
    "engine/admission=decision",
    "engine/guard=rid",
    "faults=offer_flap",
    *SHORT_PREFIXES,
    "engine.kv.host_tier=true",
    "engine.kv.prefetch_ms=[2,30000]",  # rank 1's load-back never lands within the run
]
OFFER = "engine.guard.defer_streak=offer"
# the livelock bound's reason: one rid, refused unresolved at two alternating offers
REPEATING = re.compile(r"repeating: \[\((\d+), (\d+), -1\), \((\d+), (\d+), -1\)\]")


def _alternation(reason: str) -> tuple[int, int, int]:
    m = REPEATING.search(reason)
    assert m is not None, reason
    rid, told_a, rid_b, told_b = map(int, m.groups())
    assert rid == rid_b and told_a != told_b, reason
    return rid, told_a, told_b


# -- the Guard itself -------------------------------------------------------------------------
TOKENS = list(range(40))


def _laps(g: Guard, offers: list[int], rid: int = 5) -> list[int | None]:
    """Rank 0 offers `offers` in turn (its own match each round); every offer it makes is
    refused unresolved. Returns what clamp answered each round (None = held)."""
    told = []
    for local in offers:
        t = g.clamp(rid, TOKENS, local)
        told.append(t)
        if t is not None:
            g.learn(rid, TOKENS, t, UNRESOLVED)
    return told


def test_refusal_keyed_streak_survives_an_alternating_offer_and_escalates():
    g = make_guard("rid", defer_cap=3)
    told = _laps(g, [31, 24] * 6)
    assert g.n.escalations == 1 and g.n.streak_resets == 0
    # 31, held, 31, held, 31 -> 3 unresolved reach the cap: told=0 on the fourth offer (#944:
    # offers [4096] * 3, then 0) and from then on
    assert told[:6] == [31, None, 31, None, 31, 0] and set(told[6:]) == {0}


def test_offer_keyed_streak_restarts_at_every_change_and_never_escalates():
    g = make_guard("rid", defer_cap=3, defer_streak="offer")
    # a held round consumes one lookup, so the offers rank 0 makes are every other one
    told = _laps(g, [31, 24, 24, 31] * 10)
    assert g.n.escalations == 0 and g.n.streak_resets > 10
    made = [t for t in told if t is not None]
    assert set(made) == {24, 31} and all(a != b for a, b in zip(made, made[1:]))
    assert 0 not in told


def test_offer_keyed_streak_still_escalates_a_standing_offer_and_the_pin_lasts_one_offer():
    g = make_guard("rid", defer_cap=3, defer_streak="offer")
    told = _laps(g, [31] * 6)
    assert told == [31, None, 31, None, 31, 0]
    assert g.n.escalations == 1
    # the pin (told=0) was refused too: exempt, held one round; it was itself a changed
    # offer, so the next one is the measured offer again with the streak restarted
    assert g.n.exempt == 1 and g.clamp(5, TOKENS, 31) is None
    assert g.clamp(5, TOKENS, 31) == 31 and g.defers.get(5, 0) == 0


def test_told_zero_is_exempt_under_offer_and_counted_under_refusal():
    for streak, counted in (("offer", 0), ("refusal", 1)):
        g = make_guard("rid", defer_cap=3, defer_streak=streak)
        assert g.clamp(5, TOKENS, 0) == 0
        g.learn(5, TOKENS, 0, UNRESOLVED)
        assert g.defers.get(5, 0) == counted, streak
        assert g.n.exempt == 1 - counted and g.n.unresolved == 1


def test_an_unrefused_moving_offer_never_escalates_in_either_design():
    """#955's healthy end, preserved by #987: offers move, nobody refuses, nothing escalates."""
    for streak in ("refusal", "offer"):
        g = make_guard("rid", defer_cap=1, defer_streak=streak)
        assert [g.clamp(5, TOKENS, n) for n in (8, 16, 24, 32, 8)] == [8, 16, 24, 32, 8]
        assert g.n.escalations == 0 and not g.defers and not g.escalated


def test_served_clears_the_offer_memory():
    g = make_guard("rid", defer_cap=3, defer_streak="offer")
    _laps(g, [31, 31, 31])
    g.served(5)
    assert 5 not in g.last_offer and 5 not in g.defers


# -- red / green on the sim transport ---------------------------------------------------------
def test_red_the_offer_keyed_streak_livelocks_on_the_alternation(engine):
    red, d = engine(*FLAP, OFFER)
    assert red["verdict"] == "livelocked", red["reason"]
    assert red["reason"].startswith("livelock: 24 consecutive voided passes with no token served")
    rid, a, b = _alternation(red["reason"])
    assert {a, b} == {24, 31}, red["reason"]
    assert red["escalations"] == 0 and red["defer_streak_resets"] > 10
    ev = pd.read_parquet(os.path.join(d, "events.parquet"))
    assert (ev.kind == "escalation").sum() == 0
    told = ev[(ev.kind == "retract") & (ev.rid == rid)].detail.str.extract(r"told=(\d+)")[0]
    told = told.astype(int).tolist()
    # rank 0's tree gains the voided extension once (24, 24), then every offer differs
    assert set(told) == {a, b} and len(told) > 20, told
    assert all(x != y for x, y in zip(told[2:], told[3:])), told


def test_green_the_refusal_keyed_streak_escalates_and_serves(engine):
    green, d = engine(*FLAP)
    assert green["verdict"] == "served", green["reason"]
    assert green["escalations"] > 0 and green["defer_streak_resets"] == 0
    assert green["oracle_mismatches"] == 0
    ev = pd.read_parquet(os.path.join(d, "events.parquet"))
    esc = ev[ev.kind == "escalation"]
    assert len(esc) == green["escalations"] and esc.detail.str.contains("next told=0").all()


def test_without_the_flap_the_offer_keyed_streak_escalates_too(engine):
    """The control: a standing offer reaches the cap under #944's keying as well; the
    alternation is what defeats it."""
    plain = [o for o in FLAP if o != "faults=offer_flap"] + ["faults=host_prefetch"]
    s, _ = engine(*plain, "faults.pool.tokens=64", OFFER)
    assert s["verdict"] == "served" and s["escalations"] > 0, s["reason"]


def test_the_default_is_the_refusal_keyed_streak():
    assert compose(*FLAP).engine.guard.defer_streak == "refusal"


def test_red_over_real_gloo_processes(ppx_run):
    gloo = on_gloo(FLAP)
    proc, s, _ = ppx_run(*gloo, OFFER, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "livelocked", s["reason"]
    assert "consecutive voided passes with no token served" in s["reason"]
    _alternation(s["reason"])
    assert s["escalations"] == 0


# -- validation -------------------------------------------------------------------------------
REFUSED = {
    "unknown value": ([*FLAP, "engine.guard.defer_streak=told"], "refusal | offer"),
    "guard off": (
        [*FLAP, "engine/guard=off", OFFER],
        "engine.guard.defer_streak=offer means nothing: engine/guard=off",
    ),
    "cap disabled": (
        [*FLAP, "engine.guard.defer_cap=0", OFFER],
        "defer_cap=0: the bound is disabled",
    ),
    "miss zero": ([*FLAP, "engine.guard.miss=zero", OFFER], "no rank ever reports unresolved"),
    "flap negative": ([*FLAP, "faults.offer_flap.tokens=-1"], "faults.offer_flap.tokens=-1"),
    "flap rank_local": (
        [*SIM[:2], "engine/ordering=upstream", "faults.offer_flap.tokens=7"],
        "only rank 0's offer flaps",
    ),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_validation_refuses_with_one_line(overrides, message):
    assert_refused(overrides, message)
