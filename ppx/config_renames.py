"""Config keys that moved, old dotted path -> new, and what follows from a move.

A key moves when a schema section is split (a class past 15 fields, issue #34). Two things
must keep working for the people who wrote the old name down:
- a saved schedule replays (`python -m ppx.replay FILE`): its overrides and its recorded
  config are rewritten to the new paths before they are composed or merged;
- a command line, study cell or preset that still says the old key is refused in one line
  that names the new one, before Hydra's multi-line "not in struct" and before any spawn.
A move is one line in `RENAMED`; nothing else in ppx spells an old path.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterable

RENAMED: dict[str, str] = {}


def _split(override: str) -> tuple[str, str, str] | None:
    """(prefix, key, rest) of a `key=value` override (`+`/`++`/`~` prefixes kept); None for
    a group choice (`engine/guard=rid`) or a bare flag."""
    key, eq, value = override.partition("=")
    stripped = key.lstrip("+~")
    if not eq and not key.startswith("~"):
        return None
    if "/" in stripped:
        return None
    return key[: len(key) - len(stripped)], stripped, f"{eq}{value}"


def moved(key: str) -> str | None:
    """The new path of `key`, or of the section it lies under; None when it did not move."""
    for old, new in RENAMED.items():
        if key == old or key.startswith(old + "."):
            return new + key[len(old) :]
    return None


def migrate_overrides(overrides: Iterable[str]) -> list[str]:
    """The overrides with every moved key written at its new path."""
    out = []
    for o in overrides:
        parts = _split(o)
        new = moved(parts[1]) if parts else None
        out.append(o if parts is None or new is None else f"{parts[0]}{new}{parts[2]}")
    return out


def migrate_config(config: dict) -> dict:
    """A copy of a resolved config (nested dicts) with every moved key at its new path."""
    out = copy.deepcopy(config)
    for old, new in RENAMED.items():
        *head, leaf = old.split(".")
        parent = out
        for part in head:
            parent = parent.get(part) if isinstance(parent, dict) else None
            if parent is None:
                break
        if not isinstance(parent, dict) or leaf not in parent:
            continue
        value = parent.pop(leaf)
        *new_head, new_leaf = new.split(".")
        target = out
        for part in new_head:
            target = target.setdefault(part, {})
        target[new_leaf] = value
    return out


def renamed_problem(overrides: Iterable[str]) -> str | None:
    """One line naming the first override that uses a moved key, or None."""
    for o in overrides:
        parts = _split(o)
        new = moved(parts[1]) if parts else None
        if parts is not None and new is not None:
            return f"{parts[1]} was renamed {new}: write {parts[0]}{new}{parts[2]}"
    return None


def refuse_renamed(argv: list[str] | None = None, prog: str = "ppx") -> None:
    """Exit 2 with one line when a command line says a moved key (before Hydra parses it)."""
    problem = renamed_problem(a for a in (sys.argv[1:] if argv is None else argv) if "=" in a)
    if problem:
        print(f"{prog}: config error: {problem}", file=sys.stderr)
        sys.exit(2)
