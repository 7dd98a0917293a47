"""One default per switch (issue 34, item 4): the schema's (whose protocol fields read the
registry). A group preset in conf/ states only what it changes; one that restates a default
would keep the old value alive in a second place when the default moves."""

from __future__ import annotations

import dataclasses
import os

import yaml
from ppx_helpers import ROOT

from ppx.config import GROUP_SCHEMAS


def restated(group: str, preset: dict) -> list[str]:
    """Keys of `preset` (a group's yaml) whose value is the schema's default."""
    schema = GROUP_SCHEMAS[group]
    defaults = {f.name: f.default for f in dataclasses.fields(schema)}
    return [
        k
        for k, v in preset.items()
        if k not in ("defaults", "name") and k in defaults and defaults[k] == v
    ]


def presets():
    for group in GROUP_SCHEMAS:
        d = os.path.join(ROOT, "conf", group)
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if f.endswith(".yaml"):
                with open(os.path.join(d, f)) as fh:
                    yield group, f, yaml.safe_load(fh) or {}


SCOPE = ("engine/admission", "engine/guard", "engine/ordering", "flip", "faults")


def test_no_protocol_or_fault_preset_restates_a_default():
    # the protocol switches and faults; model, workload, watch and logger presets are values
    # a run is built from (a model's shape), stated whole on purpose
    found = {f"{g}/{f}": restated(g, p) for g, f, p in presets() if g in SCOPE}
    assert {k: v for k, v in found.items() if v} == {}


def test_a_restated_default_is_seen():
    assert restated("flip", {"name": "x", "enabled": True, "max_flips": 0}) == ["max_flips"]
