"""A study file (`experiments/<NAME>.yaml`) and the cells it expands to.

A study names one research question, the overrides common to every run (`base`), the
cells (a cartesian `sweep` or an explicit `cells` list), the launcher, and the outcomes it
expects. Everything here is pure: parsing and expansion, no processes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ppx.config_renames import renamed_problem

Cell = dict[str, str]  # override key (as written, minus +/++) -> value string

_HYDRA_SPECIAL = set(",[](){}'\" =\\:*?$")


def value_text(value: Any) -> str:
    """A YAML value as the plain string Hydra records for it (`true`, `null`, `2`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(value_text(v) for v in value) + "]"
    if isinstance(value, dict):  # Hydra's dict syntax: {odd:[chain,launch]}
        return "{" + ",".join(f"{k}:{value_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def fmt_value(value: Any) -> str:
    """Render a YAML value as Hydra override text, quoted when Hydra would split it."""
    text = value_text(value)
    if isinstance(value, (list, dict)) or (
        (text[:1], text[-1:]) in (("[", "]"), ("{", "}")) and not set(text) & set(" '\"=")
    ):
        return text  # Hydra's own list / dict syntax (a YAML list in a cell is kept as `[2,300]`)
    if any(c in _HYDRA_SPECIAL for c in text):
        # Quoted so a value with a comma is one value, not a sweep over two.
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text


def norm_key(key: str) -> str:
    return key.strip().lstrip("+~")


def parse_override(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep:
        raise ValueError(f"override {item!r} has no '='")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return norm_key(key), value


@dataclass
class Study:
    name: str
    question: str
    base: list[str] = field(default_factory=list)
    sweep: dict[str, list[Any]] = field(default_factory=dict)
    cells: list[Cell] = field(default_factory=list)  # explicit cells; empty = use sweep
    # per explicit cell, names that are not overrides (`label: {incident: void_ring, arm:
    # red}`): they become table columns / grid axes and `when` keys, never reach ppx.run
    labels: list[dict[str, str]] = field(default_factory=list)
    launcher: dict[str, Any] = field(default_factory=lambda: {"name": "joblib", "n_jobs": 2})
    expect: list[dict[str, Any]] = field(default_factory=list)
    group: str | None = None  # W&B group; defaults to the study name
    columns: list[str] = field(default_factory=list)  # table/grid keys; empty = varied keys
    path: Path | None = None
    # `run`: each cell is one run (python -m ppx.run); `explore`: each cell is an exploration
    # of many simulated schedules (python -m ppx.explore), whose summary has frac_<verdict>
    runner: str = "run"

    @property
    def explicit(self) -> bool:
        return bool(self.cells)

    def expand(self) -> list[Cell]:
        """Every cell of the study, in the order Hydra's basic sweeper numbers jobs."""
        if self.cells:
            return [dict(c) for c in self.cells]
        keys = list(self.sweep)
        values = [[value_text(v) for v in self.sweep[k]] for k in keys]
        return [dict(zip(keys, combo)) for combo in itertools.product(*values)]

    def forcing(self, settings: list[str]) -> Study:
        """This study with `settings` (`key=value`) in every cell, replacing the cell's own
        value (`--every-cell model=hash`: a cell that names its model gets this one), so the
        runs and the cells their overrides are matched to stay one set."""
        pairs = [parse_override(s) for s in settings]
        keys = {k for k, _ in pairs}
        base = [b for b in self.base if parse_override(b)[0] not in keys] + list(settings)
        cells = [{k: v for k, v in c.items() if k not in keys} | dict(pairs) for c in self.cells]
        sweep = {k: v for k, v in self.sweep.items() if k not in keys}
        return replace(self, base=base, cells=cells, sweep=sweep)

    @property
    def cell_keys(self) -> list[str]:
        """The table columns / grid axes: `columns` when the study names them, else the
        keys that vary between cells."""
        if self.columns:
            return list(self.columns)
        if not self.cells:
            return list(self.sweep)
        keys: dict[str, None] = {}
        for cell in self.cells:
            keys.update(dict.fromkeys(cell))
        return list(keys)


def _as_cell(raw: Any) -> Cell:
    if isinstance(raw, dict):
        return {norm_key(str(k)): value_text(v) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return dict(parse_override(str(item)) for item in raw)
    if isinstance(raw, str):
        return dict(parse_override(item) for item in raw.split())
    raise ValueError(f"a cell must be a list of overrides or a mapping, got {raw!r}")


def _labels_of(raw: Any) -> dict[str, str]:
    label = raw.get("label") if isinstance(raw, dict) else None
    if label is None:
        return {}
    if not isinstance(label, dict):
        raise ValueError(f"a cell's `label` must be a mapping of names, got {label!r}")
    return {str(k): value_text(v) for k, v in label.items()}


def _without_label(raw: Any) -> Any:
    return {k: v for k, v in raw.items() if k != "label"} if isinstance(raw, dict) else raw


def _as_launcher(raw: Any) -> dict[str, Any]:
    if raw is None:
        raw = {}
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"launcher must be a name or a mapping, got {raw!r}")
    out = {"name": "joblib", **raw}
    if out["name"] == "joblib":
        out.setdefault("n_jobs", 2)  # 2 cores on the reference machine
    return out


def parse_study(data: dict[str, Any], name: str, path: Path | None = None) -> Study:
    # `defs` is never read: it is where a study keeps YAML anchors (`&A`) that its cells
    # merge in (`<<: *A`), so families of cells share their common overrides.
    known = {"question", "base", "sweep", "cells", "launcher", "expect", "group", "columns", "defs"}
    known |= {"runner"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"study {name}: unknown keys {unknown} (known: {sorted(known)})")
    if not data.get("question"):
        raise ValueError(f"study {name}: `question` is required")
    sweep = {
        norm_key(str(k)): (v if isinstance(v, list) else [v])
        for k, v in (data.get("sweep") or {}).items()
    }
    raw_cells = data.get("cells") or []
    labels = [_labels_of(c) for c in raw_cells]
    cells = [_as_cell(_without_label(c)) for c in raw_cells]
    if sweep and cells:
        raise ValueError(f"study {name}: give either `sweep` or `cells`, not both")
    expect = data.get("expect") or []
    if not isinstance(expect, list) or not all(isinstance(e, dict) for e in expect):
        raise ValueError(f"study {name}: `expect` must be a list of mappings")
    group = data["group"] if "group" in data else name
    columns = data.get("columns") or []
    if not isinstance(columns, list):
        raise ValueError(f"study {name}: `columns` must be a list of override keys")
    runner = str(data.get("runner", "run"))
    if runner not in ("run", "explore"):
        raise ValueError(f"study {name}: runner must be run or explore, got {runner!r}")
    written = [str(b) for b in data.get("base") or []]
    written += [f"{k}={v[0]}" for k, v in sweep.items() if v]
    written += [f"{k}={v}" for c in cells for k, v in c.items()]
    if (problem := renamed_problem(written)) is not None:  # before any cell is spawned
        raise ValueError(f"study {name}: {problem}")
    return Study(
        runner=runner,
        name=name,
        question=str(data["question"]).strip(),
        base=[str(b) for b in data.get("base") or []],
        sweep=sweep,
        cells=cells,
        labels=labels if any(labels) else [],
        launcher=_as_launcher(data.get("launcher")),
        expect=expect,
        group=group,
        columns=[norm_key(str(c)) for c in columns],
        path=path,
    )
