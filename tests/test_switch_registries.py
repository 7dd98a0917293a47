"""The switches outside the protocol package (kernels, model kind, workload, start method, the
simulator's clock and wire rules) resolve through their tables (ppx/switch.py): an unknown
value is refused in one line before anything is spawned, every preset names a known entry,
and no code compares one of these switches' values with a string literal."""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml
from ppx_helpers import ROOT, assert_refused, compose, run_ppx

from ppx.validation import switch_tables

TABLES = {t.key: t for t in switch_tables()}
# each switch as code reads it: a `.name` key by its last two parts (`kernels.name`, not any
# `.name`); the others by their own last part
OWNERS = {
    "ppx/switch.py",
    "ppx/engine/kernels/registry.py",
    "ppx/engine/model/kinds.py",
    "ppx/frontend/kinds.py",
    "ppx/launch/start_methods.py",
    "ppx/sim/scheduler.py",
    "ppx/sim/timing.py",
    "ppx/engine/transport/sim_nccl_rules.py",
}


def test_every_switch_is_tabled():
    assert sorted(TABLES) == sorted(
        [
            "engine.kernels.name", "model.name", "workload.name", "engine.start_method",
            "explore.clock", "sim.semantics", "sim.connect", "sim.connect_order",
            "sim.communicators", "sim.p2p_api", "sim.host_sync", "faults.timing",
        ]
    )  # fmt: skip


@pytest.mark.parametrize("key", sorted(TABLES))
def test_red_an_unknown_value_is_refused_in_one_line(key):
    names = " | ".join(TABLES[key].names)
    assert_refused([f"{key}=bogus"], f"{key}='bogus': {names}")


def test_red_the_cli_refuses_before_anything_is_spawned(tmp_path):
    proc, summary = run_ppx(str(tmp_path / "run"), "model.name=bogus", "engine.transport=sim")
    assert proc.returncode != 0 and summary is None
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["ppx: config error: model.name='bogus': tiny | micro | interp | hash | hf"]
    assert not os.path.exists(tmp_path / "run" / "ranks")  # no rank was started


@pytest.mark.parametrize(
    "group, key",
    [("model", "model.name"), ("workload", "workload.name"), ("engine/kernels", "engine.kernels.name")],
)  # fmt: skip
def test_green_every_preset_names_a_tabled_entry(group, key):
    presets = glob.glob(os.path.join(ROOT, "conf", group, "*.yaml"))
    named = {yaml.safe_load(open(p)).get("name") for p in presets} - {None}
    assert named and named <= set(TABLES[key].names)


def test_green_the_tables_decide():
    from ppx.engine.kernels.registry import KERNELS
    from ppx.engine.model.factory import is_hash
    from ppx.frontend.kinds import WORKLOADS

    cfg = compose("model=hash", "engine/kernels=triton")
    assert is_hash(cfg) and KERNELS.of(cfg).interpreted_on_cpu
    cfg = compose()
    assert not is_hash(cfg) and not KERNELS.of(cfg).interpreted_on_cpu
    assert not WORKLOADS.of(cfg).trace and WORKLOADS.of(cfg).read is None
    assert WORKLOADS.get("trace").trace and WORKLOADS.get("sharegpt").read is not None


def _reads() -> dict[str, set[str]]:
    """Attribute spelling -> the literal values a comparison with it would be a switch read."""
    out: dict[str, set[str]] = {}
    for key, table in TABLES.items():
        parts = key.split(".")
        attr = ".".join(parts[-2:]) if parts[-1] == "name" else parts[-1]
        out.setdefault(attr, set()).update(table.names)
    return out


def string_switch_reads(src: str) -> list[str]:
    """Lines comparing one of these switches' values with a literal (`==`, `!=`, `in`)."""
    reads, bad = _reads(), []
    for line in src.splitlines():
        for m in re.finditer(
            r"\.([\w.]+?)\s*(?:==|!=|\bin\b|\bnot in\b)\s*\(?\s*[\"'](\w+)[\"']", line
        ):
            attr = next((a for a in reads if m.group(1).endswith(a)), None)
            if attr is not None and m.group(2) in reads[attr]:
                bad.append(line.strip())
                break
    return bad


def test_no_code_compares_these_switches_with_a_literal():
    bad = {}
    for path in glob.glob(os.path.join(ROOT, "ppx", "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, ROOT)
        if rel not in OWNERS and (found := string_switch_reads(open(path).read())):
            bad[rel] = found
    assert bad == {}


def test_red_the_literal_check_sees_the_old_reads():
    old = [
        'return cfg.model.name == "hash"',
        'if cfg.engine.kernels.name != "triton" or str(cfg.device) != "cpu":',
        'if merged.engine.start_method not in ("forkserver", "spawn"):',
        'return self.rules.connect == "eager" or self.join(rank, comm)',
        'self.idle_clock = clock == "idle" if x.clock == "idle" else False',
        'if w.name == "sharegpt":',
    ]
    # `w.name` is any workload's name only by convention: the check sees the spelled-out key
    assert string_switch_reads("\n".join(old)) == old[:5]
    assert string_switch_reads('if lg.name == "none":') == []  # not one of these switches
