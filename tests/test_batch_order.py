"""A forwarded batch run in the follower's own queue order (#791 forwarded slice 1's stated gap).

Slice 1 made a follower execute rank 0's lengths, but its adder still walked its own waiting
queue, so the same rid set could run in another order: equal widths, permuted rows. The log
names it "silent" and leaves it to the full design (execute in decision order, ppx's default).
Here rank 1 scans its queue newest-first (`faults.lifo.rank=1`), so with
`engine.admission.batch_order=queue` its rows belong to other requests than rank 0's hidden
states: the row-count check passes, the batch fingerprint stops the group by name, and with
`engine.width_check=rows` only the oracle sees the wrong tokens. Sim transport, pp=2; one red
arm over real gloo processes.
"""

from __future__ import annotations

import re

import pytest
from ppx_helpers import GLOO_WATCH, assert_refused, compose, on_gloo

BASE = [
    "pp=2",
    "engine.transport=sim",
    "engine/ordering=decision_first",
    "engine/admission=forwarded",
    "workload.num_requests=8",
    "workload.concurrency=4",
    "workload.max_new=4",
    "faults.lifo.rank=1",
]
QUEUE = "engine.admission.batch_order=queue"
WIDTH = re.compile(
    r"proxy width check: rank1 .* rows=(\d+) vs tokens=(\d+); "
    r"upstream batch \[([\d, ]+)\] vs local \[([\d, ]+)\]"
)


def _ids(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def test_red_the_fingerprint_stops_a_permuted_batch_of_equal_width(engine):
    s, _ = engine(*BASE, QUEUE)
    assert s["verdict"] == "stopped", s["reason"]
    m = WIDTH.search(s["reason"])
    assert m is not None, s["reason"]
    assert m.group(1) == m.group(2)  # the same width: rows alone could not see it
    upstream, local = _ids(m.group(3)), _ids(m.group(4))
    assert sorted(upstream) == sorted(local) and upstream != local  # same rids, other order


def test_red_behind_a_row_count_check_only_the_oracle_sees_it(engine):
    s, _ = engine(*BASE, QUEUE, "engine.width_check=rows")
    assert s["verdict"] == "mismatch", s["reason"]
    assert s["reason"].startswith("oracle: rid "), s["reason"]
    assert s["oracle_mismatches"] > 0


@pytest.mark.parametrize("width", ["fingerprint", "rows"])
def test_green_the_decision_order_serves(engine, width):
    s, _ = engine(*BASE, f"engine.width_check={width}")  # batch_order=decision, the default
    assert s["verdict"] == "served", s["reason"]
    assert s["served"] == 8 and s["oracle_mismatches"] == 0 and s["ledger_violations"] == 0


def test_the_default_is_the_decision_order():
    assert compose(*BASE).engine.admission.batch_order == "decision"


def test_red_over_real_gloo_processes(ppx_run):
    gloo = on_gloo(BASE)
    proc, s, _ = ppx_run(*gloo, QUEUE, *GLOO_WATCH, timeout=180)
    assert s is not None, proc.stderr[-2000:]
    assert s["verdict"] == "stopped", s["reason"]
    m = WIDTH.search(s["reason"])
    assert m is not None, s["reason"]
    assert sorted(_ids(m.group(3))) == sorted(_ids(m.group(4))), s["reason"]


REFUSED = {
    "unknown value": ([*BASE, "engine.admission.batch_order=fifo"], "decision | queue"),
    "rank_local": (
        ["pp=2", "engine/admission=rank_local", QUEUE],
        "rank_local has no decision to reorder",
    ),
    "row_authority": (
        ["pp=2", "engine/ordering=decision_first", "engine/admission=row_authority", QUEUE],
        "row_authority executes rank 0's rows verbatim",
    ),
    "pp=1": ([*BASE, "pp=1", QUEUE], "batch_order=queue needs pp >= 2"),
}


@pytest.mark.parametrize("overrides,message", REFUSED.values(), ids=REFUSED.keys())
def test_validation_refuses_with_one_line(overrides, message):
    assert_refused(overrides, message)
