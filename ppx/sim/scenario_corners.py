"""The corners a scenario draws whole, and the continuation switches it draws where the
design leaves them open (scenario.py's `_draw` calls both).

A mechanism that needs a conjunction of independent draws comes up rarely: a carried
continuation needs a flip mid-prefill (flip.due=clock) that keeps it (flip.continuation=
survive), a prompt several chunks long and flips often, which came up in ~1 scenario of 60;
a learned floor needs a follower's pool too short for the shared prefixes rank 0 keeps. Each
is drawn whole in one scenario of four (`draw_focus`), the rest of the scenario drawn as
usual, so the coverage reaches them within seconds; the open draw keeps the other half (at
one in five, the search's steering climbed toward the floors' corner and the #959 guard's
refusals fired in 0-5 scenarios of 60 s, decision design, load ~7; at one in four in 11-13).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from ppx.protocol.continuations import CONTINUATIONS, CUTOVER, Survive
from ppx.protocol.flip_due import AXIS as DUE
from ppx.protocol.flip_due import Clock

# the corners drawn whole (`draw_focus`). A flip mid-prefill that carries the continuation:
# prompts of several chunks, flips often, the continuation surviving, a slot each
MID_PREFILL = "flip mid-prefill"
MID_PREFIX_LEN = (40, 24)
MID_CHUNKS = (8, 16)
# a follower's pool too short for the shared prefixes rank 0 keeps: a retraction that
# reports partial coverage, so the guard learns a floor (probe: 3-5 requests, 40-token
# prefixes, 2-3 of them, one follower's pool 64 or 96: a floor in 16 of 32 runs, in 8 of 8
# with 2 prefixes and 64; with 24-token prefixes in 4 of 32)
SHORT_POOL = "short follower pool"
SHORT_POOL_TOKENS = (64, 96)


@dataclass(frozen=True)
class Draw:
    """What the design leaves a scenario to draw."""

    pp: int
    decides: bool  # rank 0's decision travels: a rank-local retraction means something
    open_: frozenset[str] = frozenset()  # design_scope.open_switches
    carries: bool = False  # a continuation can survive a cutover (drawn or the design's)
    max_requests: int = 6  # fewer while a shrink searches for a smaller failing scenario


def draw_focus(d, w: Draw) -> str | None:
    """A corner drawn whole, where the design has it (one scenario in four each; None, the
    open draw, shrinks first): what its mechanism needs is a conjunction of independent draws
    that came up in ~1 scenario of 60 (docs/simulation.md, the coverage table)."""
    kinds = corners(w)
    return d(st.sampled_from((None, None, *kinds)), label="focus") if kinds else None


def corners(w: Draw) -> tuple[str, ...]:
    """The corners this design has."""
    kinds: tuple[str, ...] = ()
    if w.carries:  # carried continuations and the #959 guard's refusals
        kinds += (MID_PREFILL,)
    if w.decides and w.pp >= 2:  # a follower's retraction with partial coverage: a floor
        kinds += (SHORT_POOL,)
    return kinds


def draw_carry(d, w: Draw, mid: bool) -> dict:
    """The flips' continuation switches, each where the design leaves it open (`mid`: the
    flip mid-prefill that carries, all on)."""
    out: dict = {}
    if CUTOVER.key in w.open_ and (mid or d(st.booleans(), label="continuation survives")):
        # flip.continuation=survive: a continuation carried un-retracted (carried_at_flip)
        out["continuation"] = Survive.name
    if not (w.carries and (out or CUTOVER.key not in w.open_)):
        return out  # nothing survives a cutover: where it starts and how many live is moot
    # at flip.due=drained a flip waits for the prompt mid-prefill to finish, so there is
    # never a continuation to carry: the stopwatch starts it mid-prefill
    if DUE.key in w.open_ and (mid or d(st.booleans(), label="flip mid-prefill")):
        out["due"] = Clock.name
    # one continuation per rank never leaves a second resident for the one-slot TP plan to
    # refuse: per slot, a cutover carries one per slot (#959's second_continuation_refusals)
    if CONTINUATIONS.key in w.open_ and (mid or d(st.booleans(), label="a continuation per slot")):
        out["per_slot"] = True
    return out
