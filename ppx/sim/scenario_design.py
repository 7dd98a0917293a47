"""The design a scenario exploration searches when the researcher names none.

`python -m ppx.explore explore.scenarios=N` draws scenarios *within* a design (scenario.py);
the design itself -- who admits (`engine/admission`), in what order a pass's channel steps run
(`engine/ordering`), what the guard learns (`engine/guard`) -- is the researcher's. Left
unnamed, the run's default is upstream SGLang's rank-local admission, which has no decision to
void, no guard to learn a floor, no row to defer and no escalation (design_scope.absent), and
which diverges by design at the first scenario whose ranks see different pools (DESIGN:
"correct only while ranks agree": at pp=3 a pool skew wedges it within a few scenarios). A
scenario search of it stops at that known divergence with four of the nine mechanism groups
unreachable, so out of the box it exercised little of what the explorer is for.

So when none of the three is named, on the command line or by an experiment preset, a
scenario exploration searches DEFAULT_DESIGN: the design the reference log converged on
(rank 0 decides, the decision on the wire first, the per-rid guard: the fork's
sgl-project#791/#795/#630 line), in which every mechanism group can fire. It is printed,
written to summary.json (`design_default`) and carried in every replay command; naming any
of the three (e.g. `engine/admission=rank_local`) explores that design instead, the run's
default included. A schedule exploration (`explore.scenarios=0`) always
runs the config as composed: its one scenario is the researcher's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ppx.sim.design_scope import named_keys

# the design searched where none is named (the overrides a replay command carries)
DEFAULT_DESIGN = ("engine/admission=decision", "engine/ordering=decision_first", "engine/guard=rid")
# the config groups that make a design, and the keys inside them that rename one
DESIGN_GROUPS = ("engine/admission", "engine/ordering", "engine/guard")
DESIGN_KEYS = (
    "engine.admission.name",
    "engine.ordering.name",
    "engine.ordering.steps",
    "engine.ordering.per_rank",
    "engine.guard.name",
)


def design_named(cfg: Any, overrides: Iterable[str], run_default: Any) -> str | None:
    """What names the design under test (an override's key, or a group an experiment preset
    set away from the run's default), or None where the researcher left it open.
    `run_default`: the explorer's config composed with no override (the run's default design)."""
    for key in sorted(named_keys(overrides)):
        if key in DESIGN_GROUPS or key in DESIGN_KEYS:
            return key
    for group in DESIGN_GROUPS:
        part = group.split("/")[1]
        mine, default = cfg.engine[part].name, run_default.engine[part].name
        if mine != default:  # an experiment preset (+exp=...) chose it
            return f"{group}={mine}"
    return None


def default_design(cfg: Any, overrides: Iterable[str], run_default: Any) -> list[str]:
    """The overrides a scenario exploration adds to reach DEFAULT_DESIGN: none where the
    exploration is of one scenario or the researcher named a design (design_named)."""
    if int(cfg.explore.scenarios) <= 0:
        return []
    if design_named(cfg, overrides, run_default) is not None:
        return []
    return list(DEFAULT_DESIGN)
