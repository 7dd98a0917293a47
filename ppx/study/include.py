"""Studies built on another study: its cells and expectations, under several variants.

Three keys of a study file, expanded here into plain `cells` and `expect` before parsing:
- `cells_from: NAME` -- every cell of experiments/NAME.yaml, its `base` folded into each cell
  (the cell's own value wins), its labels kept; the study's own `cells` follow.
- `variants: [{label: {...}, key: value, ...}, ...]` -- every cell once per variant: the
  variant's overrides on top of the cell's, its labels added to the cell's.
- `expect_from: {study: NAME, when: [{...}, ...]}` -- NAME's expectations, once per `when`
  mapping, each narrowed to it (e.g. "every gallery expectation holds on this wire too").
So a study of the incident gallery under another wire stays in step with the gallery as pairs
are added to it (experiments/nccl_semantics.yaml).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ppx.study.paths import find_study
from ppx.study.spec import parse_override

KEYS = ("cells_from", "variants", "expect_from")


def _load(name: str, experiments: str | Path | None) -> dict[str, Any]:
    data = yaml.safe_load(find_study(name, experiments).read_text()) or {}
    if any(k in data for k in KEYS):
        raise ValueError(f"study {name}: a study named by cells_from / expect_from cannot include")
    return data


def _label(raw: Any) -> dict[str, Any]:
    return dict(raw.get("label") or {}) if isinstance(raw, dict) else {}


def resolve(data: dict[str, Any], experiments: str | Path | None = None) -> dict[str, Any]:
    """`data` with cells_from / variants / expect_from expanded (a new dict)."""
    if not any(k in data for k in KEYS):
        return data
    out = {k: v for k, v in data.items() if k not in KEYS}
    cells = []
    if data.get("cells_from"):
        other = _load(str(data["cells_from"]), experiments)
        base = dict(parse_override(str(b)) for b in other.get("base") or [])
        for raw in other.get("cells") or []:
            if not isinstance(raw, dict):
                raise ValueError(f"cells_from {data['cells_from']}: cells must be mappings")
            cells.append({**base, **raw})
    cells += list(data.get("cells") or [])
    variants = data.get("variants") or [{}]
    if not all(isinstance(v, dict) for v in variants):
        raise ValueError("variants must be a list of mappings (overrides and a label)")
    out["cells"] = [
        {
            **{k: v for k, v in cell.items() if k != "label"},
            **{k: v for k, v in var.items() if k != "label"},
            "label": {**_label(cell), **_label(var)},
        }
        for cell in cells
        for var in variants
    ]
    expect = list(data.get("expect") or [])
    if data.get("expect_from"):
        spec = data["expect_from"]
        other = _load(str(spec["study"]), experiments)
        for extra in spec.get("when") or [{}]:
            tag = " ".join(f"{k}={v}" for k, v in extra.items())
            for exp in other.get("expect") or []:
                named = f"[{tag}] {exp['name']}" if exp.get("name") else None
                expect.append(
                    {**exp, "when": {**(exp.get("when") or {}), **extra}}
                    | ({"name": named} if named else {})
                )
    out["expect"] = expect
    return out
