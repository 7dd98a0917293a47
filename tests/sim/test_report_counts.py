"""failure_counts over an exploration's table (ppx/sim/report.py): a table that mixes served
schedules (no cycle) with a wedged one (a cycle) counts the wedge. pandas stores the served
rows' missing cycle as NaN there, a truthy float the key's regex refused (found on the #802
cell's own load: `python -m ppx.explore ... explore.schedules=20` ended in a TypeError)."""

from __future__ import annotations

from ppx.sim.merge import Exploration
from ppx.sim.report import failure_counts
from ppx.sim.runner import COLUMNS, failure_key
from ppx.sim.shard import Failure

CYCLE = "rank0 -[flush decision]-> rank1 -[recv output slot=1]-> rank0"


def _row(i: int, verdict: str, reason: str, cycle: str | None) -> dict:
    return dict.fromkeys(COLUMNS) | {
        "schedule": i,
        "verdict": verdict,
        "reason": reason,
        "cycle": cycle,
    }


def test_a_served_row_beside_a_wedged_one_is_counted_by_its_own_key():
    wedged = _row(1, "wedged", "no task can run", CYCLE)
    ex = Exploration(rows=[_row(0, "served", "", None), wedged, _row(2, "served", "", None)])
    assert str(ex.table["cycle"][0]) == "nan"  # the table's own reading of a served row
    key = failure_key("wedged", "no task can run", CYCLE)
    ex.failures[key] = Failure(key, 1, "random", 1, "wedged", "no task can run", [], [], {})
    assert failure_counts(ex) == {key: 1}
