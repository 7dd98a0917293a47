"""Admission: how a slot's prefill batch is formed and agreed on across ranks.

`make_seams` builds, for one rank, the seams the pass holds (base.py): the admission
(schedule, decision), the return path (laps, voids), the cutover (release, re-admit), the TP
phase's #1175 floor, and the upstream rule they share (prefill.py). rank_local forms its own
batches and has no return path; every design whose decision travels is one admission, told
apart by the design's traits (executes, never_voids) and the designs it holds.
"""

from __future__ import annotations

from ppx.engine.admission.seams import Seams, make_seams

__all__ = ["Seams", "make_seams"]
