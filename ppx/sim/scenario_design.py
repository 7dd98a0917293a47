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
scenario exploration searches `explore.design`: by default the design the reference log
converged on (rank 0 decides, the decision on the wire first, the per-rid guard: the fork's
sgl-project#791/#795/#630 line), in which every mechanism group can fire. It is printed,
written to summary.json (`design_default`) and carried in every replay command, and
`explore.design=[]` (or naming any of the three, e.g. `engine/admission=rank_local`)
explores the run's own default instead. A schedule exploration (`explore.scenarios=0`) always
runs the config as composed: its one scenario is the researcher's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ppx.sim.design_scope import named_keys

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
    """The overrides a scenario exploration adds to reach `explore.design`: none where the
    exploration is of one scenario, `explore.design` is empty or the researcher named a
    design (design_named)."""
    x = cfg.explore
    if int(x.scenarios) <= 0 or not list(x.design):
        return []
    if design_named(cfg, overrides, run_default) is not None:
        return []
    return [str(o) for o in x.design]


def check_design(design: Iterable[str]) -> None:
    """Each entry of `explore.design` is one Hydra override of a design group (or key)."""
    from ppx.config import ConfigError

    for o in design:
        key = str(o).split("=", 1)[0].lstrip("+~")
        if "=" not in str(o) or not (key in DESIGN_GROUPS or key in DESIGN_KEYS):
            raise ConfigError(
                f"explore.design: {o!r} is not an override of {', '.join(DESIGN_GROUPS)} "
                "(e.g. engine/admission=decision)"
            )
