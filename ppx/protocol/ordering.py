"""Channel orderings: the order of a pass's steps and which receives block (data, not code).

An ordering is a YAML list (conf/engine/ordering/*.yaml, or the user's own) of the steps
`chain`, `schedule`, `decision` (or its halves `decision.send` / `decision.recv`), `launch`,
`output`, `lap`, `flush`, with options `block` (lap: a blocking receive instead of a peek),
`flush` (complete this step's sends before going on) and `kinds` (flush: only these message
kinds). Two steps model protocols ppx was not built from: `collective` (`op`: all_reduce,
all_gather, broadcast or barrier, entered by every rank: a world collective placed in the
pass) and `group` (`steps`: the steps inside, issued as one transport group, NCCL's
ncclGroupStart/End). The presets reproduce the reference log's orderings; docs/protocols.md
names the wedge each reproduces.

`engine.ordering.per_rank` gives some ranks another list: keys are a rank number, `first`,
`middle`, `last`, `even` or `odd`; the most specific key that names a rank wins (a number,
then first/middle/last, then parity), every other rank runs `steps`. A fix that orders a
pass's operations by rank parity is YAML, not an engine edit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppx.core import Kind

STEPS = ("chain", "schedule", "decision", "launch", "output", "lap", "flush", "collective", "group")
REQUIRED = ("chain", "schedule", "launch", "output", "flush")
COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "barrier")
# what a group may hold: steps that only send, on every rank. ppx's other steps receive
# synchronously on some rank, and a blocking receive inside an NCCL group never starts (the
# group's operations start at its end); grouping receives needs deferred receives (not built)
GROUPABLE = (("decision", "send"),)
# per_rank keys, from the most specific: a rank number beats a position beats a parity
POSITIONS = ("first", "middle", "last")
PARITIES = ("even", "odd")


@dataclass(frozen=True)
class Step:
    name: str
    part: str = ""  # "" (both halves), "send" or "recv" (decision only)
    block: bool = False  # lap: a blocking receive instead of a peek
    flush: bool = False  # complete this step's sends before going on
    kinds: tuple[str, ...] = ()  # flush: only these kinds (default: every pending send)
    op: str = ""  # collective: which one
    steps: tuple[Step, ...] = ()  # group: the steps issued inside it


def _step(item: object, extra: tuple[str, ...] = ()) -> Step:
    spec = {"step": item} if isinstance(item, str) else dict(item)  # type: ignore[call-overload]
    name, _, part = str(spec.pop("step")).partition(".")
    known = STEPS + extra  # extra: the pass steps designs add (registry.pass_steps)
    if name not in known or part not in ("", "send", "recv") or part and name != "decision":
        raise ValueError(f"unknown ordering step {item!r}; steps are {', '.join(known)}")
    unknown = set(spec) - {"block", "flush", "kinds", "op", "steps"}
    if unknown:
        raise ValueError(f"ordering step {item!r}: unknown option(s) {sorted(unknown)}")
    kinds = tuple(str(k) for k in spec.get("kinds", ()))
    bad = [k for k in kinds if k.upper() not in Kind.__members__]
    if bad or (kinds and name != "flush"):
        raise ValueError(f"ordering step {item!r}: `kinds` names message kinds, on a flush step")
    op = str(spec.get("op", "all_reduce" if name == "collective" else ""))
    if (name == "collective") != bool(op) or op and op not in COLLECTIVES:
        raise ValueError(
            f"ordering step {item!r}: `op` is one of {', '.join(COLLECTIVES)}, on a collective step"
        )
    inner = tuple(_step(x) for x in spec.get("steps", ()))
    if (name == "group") != bool(inner) or any(x.name == "group" for x in inner):
        raise ValueError(f"ordering step {item!r}: a group holds `steps` (no group inside)")
    if any((x.name, x.part) not in GROUPABLE for x in inner):
        raise ValueError(
            f"ordering step {item!r}: a group holds only steps that send on every rank "
            f"({', '.join('.'.join(g) for g in GROUPABLE)}): a blocking receive inside an "
            "NCCL group never starts"
        )
    block, flush = bool(spec.get("block", False)), bool(spec.get("flush", False))
    return Step(name, part, block, flush, kinds, op, inner)


def flat(steps: list[Step]) -> list[Step]:
    """The steps in the order they run, a group's inner steps in its place."""
    return [x for s in steps for x in (s.steps if s.name == "group" else (s,))]


def parse_ordering(steps: list, extra: tuple[str, ...] = ()) -> list[Step]:
    """Steps are strings (`chain`, `decision.send`) or maps (`{step: lap, block: true}`);
    `extra`: the step names designs add."""
    out = [_step(item, extra) for item in steps]
    names = [s.name for s in flat(out)]
    for required in REQUIRED:
        if required not in names:
            raise ValueError(f"ordering lacks the {required!r} step")
    return out


def rank_key(per_rank: dict, rank: int, world: int) -> str | None:
    """The `per_rank` key that gives `rank` its ordering (None: the shared `steps`)."""
    position = "first" if rank == 0 else "last" if rank == world - 1 else "middle"
    for key in (str(rank), position, PARITIES[rank % 2]):
        if key in per_rank:
            return key
    return None


def check_per_rank(per_rank: dict, extra: tuple[str, ...] = ()) -> None:
    for key in per_rank:
        if not (str(key).isdigit() or key in POSITIONS or key in PARITIES):
            raise ValueError(
                f"per_rank key {key!r}: a rank number, {', '.join(POSITIONS + PARITIES)}"
            )
        try:
            parse_ordering(list(per_rank[key]), extra)
        except ValueError as e:
            raise ValueError(f"per_rank.{key}: {e}") from None


def ordering_for(
    steps: list, per_rank: dict, rank: int, world: int, extra: tuple[str, ...] = ()
) -> list[Step]:
    """This rank's ordering: its `per_rank` list, or the shared `steps`."""
    key = rank_key(per_rank, rank, world)
    return parse_ordering(list(per_rank[key] if key is not None else steps), extra)


def has_decision_step(steps: list, extra: tuple[str, ...] = ()) -> bool:
    """A decision policy needs the whole decision step, or both of its halves."""
    parts = {(s.name, s.part) for s in flat(parse_ordering(steps, extra))}
    return bool({("decision", "")} & parts) or {("decision", "send"), ("decision", "recv")} <= parts
