"""The explorer's rank_local divergence on real gloo ranks (tests/test_proxy_turns.py has the
simulator's): rank 0's host-tier load-back is 60 ms of wall time, ranks 1 and 2 land theirs
at once, so after the TP->PP cutover rank 1 forms a batch for a slot rank 0 left empty
(4 of 4 runs stopped at pass 19 with this config, 2 of 4 with the explorer's own find).

Red (the evidence planted away in every spawned rank, the code before): rank 1 waits on a
proxy never sent and the watch names `wedged` ("every rank blocked"), or (4 of 8 red runs here)
it takes a proxy rank 0 sent dozens of passes later as the one it waits for, and the run
stops at an `output mismatch` far from the cause. Green: rank 1 reads rank 0's next chain
and stops by name at the pass that diverged, well inside the deadline.
"""

from __future__ import annotations

import time

from test_proxy_turns import HOST

# two flips on a pass count (PP -> TP -> PP), requests that outlive both: the second cutover
# re-queues them while the PP layout's host tier holds their prefix
GLOO = [
    *[o for o in HOST if not o.startswith("flip.max_flips=")], "flip.max_flips=2",
    "flip.due=clock", "workload.max_new=32", "engine.kv.prefetch_ms=[60.0,0.0,0.0]",
    "engine.transport=gloo", "watch.max_run_s=60",
]  # fmt: skip
BEFORE = """
    from ppx.engine.proxy_turns import ProxyTurns

    ProxyTurns.proxy_in = lambda self, *a, **k: None
    ProxyTurns.stashed = lambda self, *a, **k: None
"""
DEADLINE_S = 60


def test_gloo_green_the_divergence_stops_by_name(engine):
    t0 = time.time()
    s, _ = engine(*GLOO)
    assert s["verdict"] == "stopped", s
    assert s["reason"].startswith("proxy width check: rank1 slot=") and (
        "rows=0 vs tokens=" in s["reason"] and "upstream batch [] vs local [" in s["reason"]
    ), s
    assert "and no proxy of pass" in s["reason"] and s["oracle_mismatches"] == 0, s
    assert time.time() - t0 < DEADLINE_S


def test_gloo_red_without_the_evidence_it_wedges_or_stops_late(engine, plant):
    plant(BEFORE)
    t0 = time.time()
    s, _ = engine(*GLOO, "engine.start_method=spawn")
    # rank 1 waits on the proxy of pass 19 for good, or takes a proxy rank 0 sent for a later
    # pass as that one: the output ring parts much later, or (when the widths differ) the
    # width check stops it there; none of them names the pass rank 0 skipped, which is the
    # evidence's doing (the green arm's reason)
    opaque = s["verdict"] == "wedged" and s["reason"].startswith("every rank blocked")
    late = s["verdict"] == "stopped" and s["reason"].startswith("output mismatch: rank0 ")
    taken = s["verdict"] == "stopped" and s["reason"].startswith("proxy width check: ")
    assert opaque or late or taken, (s["verdict"], s["reason"])
    assert "and no proxy of pass" not in s["reason"], s["reason"]
    assert "ran that pass with no batch" not in s["reason"], s["reason"]
    assert time.time() - t0 < DEADLINE_S
