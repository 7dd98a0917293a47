"""`decision` as its own protocol: followers re-derive the geometry (#791 slice 1, instr20).

Red (`engine.admission.geometry=rederive`): a follower truncates to rank 0's told and then its
adder derives prefix and extend again from its own state; where rank 0's told was clamped
below what rank 1 holds, rank 1 takes the prefix back and computes fewer rows for the same
request: the same rid set, a different width, stopped by the proxy width check. Green
(`told`, the default): the follower executes rank 0's lengths and the run serves.
"""

from __future__ import annotations

import re

from ppx_helpers import SKEW_400

HEALS = [
    "pp=2",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    "engine/admission=decision",
    "engine/guard=rid",
    *SKEW_400,
]


def test_red_a_rederived_geometry_is_a_width_divergence_green_told_lengths_serve(engine):
    red, _ = engine(*HEALS, "engine.admission.geometry=rederive")
    assert red["verdict"] == "stopped", red["reason"]
    m = re.search(
        r"rows=(\d+) vs tokens=(\d+); upstream batch (\[.*?\]) vs local (\[.*?\])", red["reason"]
    )
    assert m, red["reason"]
    rows, tokens, up, local = m.groups()
    assert rows != tokens and up == local  # same requests, different widths
    green, _ = engine(*HEALS)
    assert green["verdict"] == "served" and green["oracle_mismatches"] == 0, green["reason"]
