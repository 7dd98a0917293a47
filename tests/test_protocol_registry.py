"""The switch table (ppx/protocol/registry.py) is the one place a design is declared: the
schema's defaults, validation, the recorded choices, the counters and the docs all come from
it, and the engine asks designs instead of comparing switch strings."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from ppx_helpers import ROOT, compose, design

from ppx.config import PPXConfig
from ppx.protocol.axis import select
from ppx.protocol.registry import AXES, CHOICE_NAMES, COUNTERS, VARIANTS, Protocol, refusal
from ppx.protocol.table import BEGIN, END, block


def test_every_schema_default_is_the_registry_default():
    cfg = PPXConfig()
    for key, (axis, designs) in AXES.items():
        assert select(cfg, key) == axis.default, key
        assert axis.default in designs, key


def test_every_design_is_listed_once_and_every_axis_has_its_default():
    names = [(v.axis.key, v.name) for v in VARIANTS]
    assert len(names) == len(set(names))
    assert {a.choice for a, _ in AXES.values()} <= set(CHOICE_NAMES)
    assert len(CHOICE_NAMES) == len(set(CHOICE_NAMES))  # one flat name per switch
    assert len({c.name for c in COUNTERS}) == len(COUNTERS)


def test_the_docs_hold_the_current_table():
    text = open(os.path.join(ROOT, "docs", "protocols.md")).read()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == block(), "run: python -m ppx.protocol --write docs/protocols.md"


def test_the_table_is_what_the_cli_prints():
    out = subprocess.run(
        [sys.executable, "-m", "ppx.protocol"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    for axis, _ in AXES.values():
        assert f"`{axis.key}`" in out
    assert out.count("(default)") == len(AXES)


def test_a_value_no_design_has_is_refused_naming_the_choices():
    cfg = PPXConfig()
    cfg.engine.admission.batch_order = "fifo"
    assert refusal(cfg) == "engine.admission.batch_order='fifo': decision | queue"
    cfg.engine.admission.batch_order = "decision"
    assert refusal(cfg) is None


def test_a_rank_holds_one_instance_of_the_chosen_design_per_axis():
    cfg = compose("pp=2", "engine/admission=decision", "engine/ordering=decision_first")
    proto = Protocol(cfg)
    assert len(proto.chosen) == len(AXES)
    from ppx.protocol.batch_order import BatchOrder, DecisionOrder

    assert type(proto.of(BatchOrder)) is DecisionOrder
    assert proto.counters()["staggered_reads"] == 0


@pytest.mark.parametrize("key", sorted(AXES))
def test_every_design_builds_from_a_typed_config(key):
    for name in AXES[key][1]:
        d = design(key, name)
        assert d.switch().startswith(key + "=") and isinstance(d.counters(), dict)


def _engine_sources():
    base = os.path.join(ROOT, "ppx")
    for d, _, files in os.walk(base):
        rel = os.path.relpath(d, base)
        if rel.startswith("protocol"):
            continue
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(d, f)


def _string_switch_reads(src: str, axes: dict | None = None) -> list[str]:
    """Lines comparing a protocol switch's value with one of THAT switch's designs, outside
    the registry. A key's last name alone identifies it only when no other key ends in it
    (`batch_order`); a shared one (`name`: engine.admission.name, engine.guard.name, ...)
    needs its parent too (`guard.name`), so `lg.name == "none"` is no switch read even
    where some axis has a design called `none`."""
    axes = AXES if axes is None else axes
    last: dict[str, int] = {}
    for k in axes:
        last[k.rsplit(".", 1)[1]] = last.get(k.rsplit(".", 1)[1], 0) + 1
    bad = []
    for line in src.splitlines():
        for m in re.finditer(r"([\w.]+)\s*(?:==|!=|in|not in)\s*\(?\s*[\"'](\w+)[\"']", line):
            chain, value = m.group(1), m.group(2)
            for key, (_, designs) in axes.items():
                parts = key.split(".")
                tail = parts[-1] if last[parts[-1]] == 1 else ".".join(parts[-2:])
                if (chain == tail or chain.endswith("." + tail)) and value in designs:
                    bad.append(line.strip())
                    break
    return bad


def test_no_engine_code_compares_a_switch_with_a_literal():
    bad = {p: _string_switch_reads(open(p).read()) for p in _engine_sources()}
    assert {p: b for p, b in bad.items() if b} == {}


def test_the_literal_check_sees_one():
    """Red arm: the shape the check exists for (the pre-registry follower) is found."""
    old = 'self.queue_order = cfg.engine.admission.batch_order == "queue"'
    assert _string_switch_reads(old) == [old]
    assert _string_switch_reads('if p.batch.mode == "prefill":') == []
    guard = 'if cfg.engine.guard.name == "rid":'
    assert _string_switch_reads(guard) == [guard]


def test_the_literal_check_is_scoped_to_switch_keys():
    """A design named `none` on one axis does not make every `.name == "none"` a switch read
    (the false positive a new user met); the same comparison on that axis's key still is."""
    axes = {**AXES, "engine.widget.name": (None, {"none": object, "fast": object})}
    assert _string_switch_reads('if lg.name == "none":', axes) == []
    assert _string_switch_reads('if cfg.logger.name == "none":', axes) == []
    read = 'if cfg.engine.widget.name == "none":'
    assert _string_switch_reads(read, axes) == [read]


def _config_fields() -> set[str]:
    import dataclasses

    out, todo = set(), [PPXConfig]
    while todo:
        for f in dataclasses.fields(todo.pop()):
            out.add(f.name)
            if (
                dataclasses.is_dataclass(f.default_factory)
                if callable(f.default_factory)
                else False
            ):
                todo.append(f.default_factory)
    return out


def _getattr_defaults(src: str, fields: set[str]) -> list[str]:
    """`getattr(x, "<a config field>", default)`: a default the schema already owns."""
    found = re.findall(r"getattr\([^()]*?,\s*[\"'](\w+)[\"']\s*,", src)
    return [name for name in found if name in fields]


def test_no_engine_code_reads_a_config_default_through_getattr():
    fields = _config_fields()
    engine = [p for p in _engine_sources() if f"{os.sep}ppx{os.sep}engine{os.sep}" in p]
    bad = {p: _getattr_defaults(open(p).read(), fields) for p in engine}
    assert {p: b for p, b in bad.items() if b} == {}


def test_the_getattr_check_sees_one():
    old = 'self.rederive = getattr(cfg.engine.admission, "geometry", "told") == "rederive"'
    assert _getattr_defaults(old, _config_fields()) == ["geometry"]
