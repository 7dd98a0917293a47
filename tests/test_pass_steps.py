"""The pass steps are a table of bound methods (issue 34, item 3): every step an ordering may
name (ppx/protocol/ordering.STEPS) has exactly one entry, and every `step_*` method is in it,
so no step is reached only by a string built at run time."""

from __future__ import annotations

from ppx_helpers import bare_steps

from ppx.engine.loop import PassSteps
from ppx.protocol.ordering import STEPS


def _steps() -> PassSteps:
    return bare_steps()


def test_every_ordering_step_has_one_bound_method_and_every_step_method_is_listed():
    ps = _steps()
    assert set(ps.table) == set(STEPS)
    methods = {n.removeprefix("step_") for n in dir(PassSteps) if n.startswith("step_")}
    assert methods == set(ps.table)
    for name, fn in ps.table.items():
        assert fn.__self__ is ps and fn.__name__ == f"step_{name}"
