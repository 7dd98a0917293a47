"""Channel orderings: the order of a pass's steps and which receives block (data, not code).

An ordering is a YAML list (conf/engine/ordering/*.yaml, or the user's own) of the steps
`chain`, `schedule`, `decision` (or its halves `decision.send` / `decision.recv`), `launch`,
`output`, `lap`, `flush`, with options `block` (lap: a blocking receive instead of a peek),
`flush` (complete this step's sends before going on) and `kinds` (flush: only these message
kinds). The presets reproduce the reference log's orderings; docs/protocols.md names the wedge
each reproduces.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppx.core import Kind

STEPS = ("chain", "schedule", "decision", "launch", "output", "lap", "flush")
REQUIRED = ("chain", "schedule", "launch", "output", "flush")


@dataclass(frozen=True)
class Step:
    name: str
    part: str = ""  # "" (both halves), "send" or "recv" (decision only)
    block: bool = False  # lap: a blocking receive instead of a peek
    flush: bool = False  # complete this step's sends before going on
    kinds: tuple[str, ...] = ()  # flush: only these kinds (default: every pending send)


def parse_ordering(steps: list) -> list[Step]:
    """Steps are strings (`chain`, `decision.send`) or maps (`{step: lap, block: true}`)."""
    out = []
    for item in steps:
        spec = {"step": item} if isinstance(item, str) else dict(item)
        name, _, part = str(spec.pop("step")).partition(".")
        if name not in STEPS or part not in ("", "send", "recv"):
            raise ValueError(f"unknown ordering step {item!r}; steps are {', '.join(STEPS)}")
        unknown = set(spec) - {"block", "flush", "kinds"}
        if unknown:
            raise ValueError(f"ordering step {item!r}: unknown option(s) {sorted(unknown)}")
        kinds = tuple(str(k) for k in spec.get("kinds", ()))
        bad = [k for k in kinds if k.upper() not in Kind.__members__]
        if bad or (kinds and name != "flush"):
            raise ValueError(
                f"ordering step {item!r}: `kinds` names message kinds, on a flush step"
            )
        out.append(
            Step(name, part, bool(spec.get("block", False)), bool(spec.get("flush", False)), kinds)
        )
    names = [s.name for s in out]
    for required in REQUIRED:
        if required not in names:
            raise ValueError(f"ordering lacks the {required!r} step")
    return out


def has_decision_step(steps: list) -> bool:
    """A decision policy needs the whole decision step, or both of its halves."""
    parts = {(s.name, s.part) for s in parse_ordering(steps)}
    return bool({("decision", "")} & parts) or {("decision", "send"), ("decision", "recv")} <= parts
