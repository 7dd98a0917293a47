"""The transport registry (issue #25 item 3): one spec per transport, the only place that knows
transport names; its config checks are one line each, before anything is spawned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from ppx_helpers import ROOT, compose

from ppx.config import ConfigError, PPXConfig
from ppx.engine.transport.registry import SIM, TRANSPORTS, spec_of, transport_spec

ERRORS = {
    "unknown transport": (["engine.transport=mpi"], "engine.transport='mpi': gloo | nccl | sim"),
    "nccl rules off the simulator": (
        ["sim.semantics=nccl"],
        "sim.semantics=nccl is a rule of the simulated wire: it needs engine.transport=sim, "
        "not gloo",
    ),
    "an nccl knob under gloo semantics": (
        ["engine.transport=sim", "sim.send_buffer_bytes=0"],
        "sim.send_buffer_bytes=0 is one of NCCL's rules: it means nothing under "
        "sim.semantics=gloo (set sim.semantics=nccl)",
    ),
    "semantics": (
        ["engine.transport=sim", "sim.semantics=mpi"],
        "sim.semantics='mpi': gloo | nccl",
    ),
    "connect": (
        ["engine.transport=sim", "sim.semantics=nccl", "sim.connect=sometimes"],
        "sim.connect='sometimes': eager | lazy",
    ),
    "layout": (
        ["engine.transport=sim", "sim.semantics=nccl", "sim.communicators=ring"],
        "sim.communicators='ring': forward | pair | kind | world",
    ),
    "api": (
        ["engine.transport=sim", "sim.semantics=nccl", "sim.p2p_api=isend"],
        "sim.p2p_api='isend': send | batch",
    ),
    "a set-up order without lazy set-up": (
        ["engine.transport=sim", "sim.semantics=nccl", "sim.connect_order=global"],
        "sim.connect_order=global orders a lazy set-up: it needs sim.connect=lazy (eager "
        "communicators exist before any order matters)",
    ),
    "negative buffer": (
        ["engine.transport=sim", "sim.semantics=nccl", "sim.send_buffer_bytes=-1"],
        "sim.send_buffer_bytes=-1: bytes >= 0",
    ),
}


@pytest.mark.parametrize("overrides,message", ERRORS.values(), ids=ERRORS.keys())
def test_each_transport_check_is_one_line(overrides, message):
    with pytest.raises(ConfigError) as e:
        compose(*overrides)
    assert str(e.value) == message


def test_the_simulator_accepts_every_nccl_rule():
    cfg = compose(
        "engine.transport=sim",
        "sim.semantics=nccl",
        "sim.send_buffer_bytes=0",
        "sim.connect=lazy",
        "sim.stream_order=false",
        "sim.independent_progress=true",
        "sim.grouped=false",
        "sim.communicators=kind",
        "sim.connect_order=next_first",
        "sim.p2p_api=batch",
        "sim.host_sync=device",
    )
    assert spec_of(cfg).simulated and cfg.sim.connect == "lazy"


def nccl_cfg(pp: int):
    cfg = OmegaConf.structured(PPXConfig)
    cfg.pp, cfg.device, cfg.engine.transport = pp, "cuda", "nccl"
    return cfg


@pytest.mark.parametrize(
    ("local", "gpus", "ok"),
    [
        ("4", 4, True),  # pp=8 over two nodes of 4 GPUs: each node holds its own 4 ranks
        (None, 4, False),  # one node: 8 ranks need 8 GPUs (the old check, for every case)
        ("8", 4, False),
    ],
)
def test_nccl_counts_devices_per_node(monkeypatch, local, gpus, ok):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    if local is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local)
    if ok:
        TRANSPORTS["nccl"].validate(nccl_cfg(8))
        return
    with pytest.raises(ValueError, match=r"one CUDA device per rank on each node \((4|8) ranks"):
        TRANSPORTS["nccl"].validate(nccl_cfg(8))


def test_the_registry_answers_what_callers_used_to_compare_strings_for():
    assert [n for n, s in TRANSPORTS.items() if s.simulated] == [SIM]
    assert transport_spec("gloo").rank_device(OmegaConf.create({"device": "cuda:1"}), None) == (
        "cuda:1"
    )
    with pytest.raises(ValueError, match="not opened per process"):
        transport_spec(SIM).open(None, 0, 1, 0)


SCHEMA_FILES = ("ppx/config.py", "ppx/config_sim.py")


def test_no_transport_name_is_compared_outside_the_registry():
    """Issue #25: `engine.transport` is never compared to a name outside
    ppx/engine/transport/ (the schema's defaults are the one name left: ppx/config.py and its
    explore/sim part, ppx/config_sim.py)."""
    pattern = re.compile(r"""transport\s*(==|!=|not in|in)\s*|(["'])(gloo|nccl)\2""")
    hits = []
    for path in sorted(Path(ROOT, "ppx").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("ppx/engine/transport/"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and not (rel in SCHEMA_FILES and "str = " in line):
                hits.append(f"{rel}:{n}: {line.strip()}")
    assert hits == []
