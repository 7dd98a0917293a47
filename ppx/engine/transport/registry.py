"""The transports, one small spec each behind one interface, registered by name.

Everything outside ppx/engine/transport/ asks here instead of comparing `engine.transport` to
a string: whether the transport runs in the simulator (one process) or one process per rank,
how the composed config is checked for it (one clear line), which device payloads travel from,
and how a rank opens it. Adding a transport is one spec class and one line in TRANSPORTS
(docs/simulation.md and the NCCL transport are the worked examples).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ppx.engine.transport.base import Transport


# the simulator's clock, not its wire's rules: any simulated run may set them
SIM_CLOCK_KEYS = ("step_us", "max_steps")


def sim_changed(cfg, skip: tuple[str, ...] = ()) -> str | None:
    """The first `sim.*` key set away from its default (ppx.config.SimCfg), or None."""
    from dataclasses import asdict

    from ppx.config import SimCfg

    for k, v in asdict(SimCfg()).items():
        if k not in skip and cfg.sim[k] != v:
            return k
    return None


class TransportSpec:
    name: ClassVar[str]
    simulated: ClassVar[bool] = False  # every rank in one process under ppx.sim
    # the process-group backend a Flight Recorder dump names (ppx/watch/flight_recorder.py):
    # gloo's rendezvous semantics on gloo and on the simulator, nccl's on nccl
    recorder_backend: ClassVar[str] = "gloo"

    def validate(self, cfg) -> None:
        """Raise ValueError (one line naming the key) when `cfg` cannot run on this transport."""
        k = sim_changed(cfg)
        if k:
            raise ValueError(
                f"sim.{k}={cfg.sim[k]} is a rule of the simulated wire: it needs "
                f"engine.transport={SIM}, not {self.name}"
            )

    def rank_device(self, cfg, t: Transport) -> str:
        """Where a rank's tensors live (its model, cache and the payloads it receives)."""
        return str(cfg.device)

    def open(self, cfg, rank: int, world: int, port: int, store=None) -> Transport:
        """The rank process's transport (`store`: torchrun's c10d store, else 127.0.0.1:port)."""
        raise NotImplementedError


class Gloo(TransportSpec):
    name = "gloo"

    def open(self, cfg, rank, world, port, store=None):
        from ppx.engine.transport import bind_device
        from ppx.engine.transport.gloo import GlooTransport

        bind_device(str(cfg.device))  # every rank on the GPU the config names
        return GlooTransport(rank, world, port, store=store)


class Nccl(TransportSpec):
    """One GPU per rank: payloads over NCCL, headers and collectives over gloo (nccl.py)."""

    name = "nccl"
    recorder_backend = "nccl"

    def validate(self, cfg) -> None:
        super().validate(cfg)
        import torch

        # ranks on this node: torchrun's LOCAL_WORLD_SIZE across nodes, every rank otherwise
        local = int(os.environ.get("LOCAL_WORLD_SIZE", cfg.pp))
        found = torch.cuda.device_count()
        if not str(cfg.device).startswith("cuda") or found < local:
            raise ValueError(
                f"engine.transport=nccl needs device=cuda and one CUDA device per rank on each "
                f"node ({local} ranks on this node, pp={cfg.pp}; found {found})"
            )

    def rank_device(self, cfg, t):
        return t.payload_device  # this rank's own GPU (LOCAL_RANK under torchrun)

    def open(self, cfg, rank, world, port, store=None):
        from ppx.engine.transport.nccl import NcclTransport, watchdog_timeout_s

        return NcclTransport(rank, world, port, store=store, timeout_s=watchdog_timeout_s(cfg))


class Sim(TransportSpec):
    """Every rank in one process under a deterministic scheduler (ppx.sim opens its wire)."""

    name = "sim"
    simulated = True

    def validate(self, cfg) -> None:
        from ppx.engine.transport.sim_nccl_rules import SEMANTICS, SIM_SWITCHES, NcclRules

        s = cfg.sim
        for switch in SIM_SWITCHES:  # ppx.validation checked them; a direct caller may not
            switch.of(cfg)
        if s.send_buffer_bytes < 0:
            raise ValueError(f"sim.send_buffer_bytes={s.send_buffer_bytes}: bytes >= 0")
        rules = NcclRules.of(s)
        if rules.order.at_startup and not rules.lazy:
            raise ValueError(
                f"sim.connect_order={s.connect_order} orders a lazy set-up: it needs "
                "sim.connect=lazy (eager communicators exist before any order matters)"
            )
        if not SEMANTICS.of(cfg).nccl:
            k = sim_changed(cfg, skip=("semantics", *SIM_CLOCK_KEYS))
            if k:
                raise ValueError(
                    f"sim.{k}={s[k]} is one of NCCL's rules: it means nothing under "
                    "sim.semantics=gloo (set sim.semantics=nccl)"
                )
            return
        # explore.reduce under NCCL's rules: ppx/sim/explore_checks.py (the simulator's)

    def open(self, cfg, rank, world, port, store=None):
        raise ValueError(
            f"engine.transport={self.name} is not opened per process (ppx.sim runs it)"
        )


TRANSPORTS: dict[str, TransportSpec] = {s.name: s for s in (Gloo(), Nccl(), Sim())}
SIM = Sim.name  # the simulator's transport (ppx.explore sets it)
GLOO = Gloo.name


def transport_spec(name: str) -> TransportSpec:
    try:
        return TRANSPORTS[str(name)]
    except KeyError:
        raise ValueError(f"engine.transport={name!r}: {' | '.join(TRANSPORTS)}") from None


def spec_of(cfg) -> TransportSpec:
    return transport_spec(cfg.engine.transport)
