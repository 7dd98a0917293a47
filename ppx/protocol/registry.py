"""The switch table: every protocol design ppx can run, one line each, grouped by axis.

This table drives the schema's defaults (ppx/config.py), validation (`refusal`, one place),
the choices recorded flat in summary.json, the run store and W&B (`choices`), the counters
every rank reports (`COUNTERS`), and the switch table in docs/protocols.md (`python -m
ppx.protocol`). Adding a design: its variant class in its axis's module, and one line here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ppx.protocol import (
    batch_order,
    continuations,
    flip,
    flip_due,
    follower_seats,
    geometry,
    load_back,
    local_extent,
    output_recv,
    policy,
    prefetch_floor,
    prefetch_short,
    readiness,
    reconcile,
    retraction,
    row_probe,
    told_scope,
    void,
    void_relay,
    width_check,
)
from ppx.protocol import refusal as on_refusal  # the module; `refusal()` below is validation
from ppx.protocol.axis import Axis, Counter, Variant, select, spelled
from ppx.protocol.guard import defer_streak, floors, miss, prefix_clear, unit

# One line per design; an axis's designs stand together, its default first.
VARIANTS: tuple[type[Variant], ...] = (
    policy.RankLocal,
    policy.Decision,
    policy.Forwarded,
    policy.RowAuthority,
    on_refusal.NotRead,
    on_refusal.VoidOnRefusal,
    on_refusal.StopOnRefusal,
    retraction.WholePass,
    retraction.Partial,
    told_scope.Pass,
    told_scope.Promise,
    told_scope.Epoch,
    told_scope.EpochRetract,
    geometry.Told,
    geometry.Rederive,
    reconcile.RunningBatch,
    reconcile.SlotScoped,
    reconcile.SchedulerWide,
    reconcile.WaitingQueue,
    void.Requeue,
    void.Keep,
    void.KeepRunning,
    batch_order.DecisionOrder,
    batch_order.QueueOrder,
    local_extent.Planned,
    local_extent.Completed,
    follower_seats.Ignore,
    follower_seats.Veto,
    prefetch_floor.Group,
    prefetch_floor.GroupPP,
    prefetch_floor.Rank0,
    prefetch_short.ClampAtOnce,
    prefetch_short.DeferToBound,
    load_back.Local,
    load_back.Admitted,
    floors.Off,
    floors.RidFloor,
    floors.PrefixFloor,
    miss.Sentinel,
    miss.Zero,
    prefix_clear.Serve,
    prefix_clear.Never,
    defer_streak.Refusal,
    defer_streak.Offer,
    unit.Rounds,
    unit.Reports,
    width_check.Fingerprint,
    width_check.Rows,
    width_check.Retracted,
    readiness.NoContract,
    readiness.Evidence,
    void_relay.Ring,
    void_relay.FirstRetracting,
    void_relay.Downstream,
    output_recv.Relayed,
    output_recv.Occupancy,
    flip.StartPP,
    flip.StartTP,
    flip.Drain,
    flip.VoidInflight,
    flip.Release,
    flip.Completion,
    flip.Shared,
    flip.Rank0Local,
    # issue 26: the row probe (#1180), continuations per slot (#798), the #959 guard + cutover
    row_probe.DeferLaps,
    row_probe.DeferClock,
    row_probe.Stop,
    continuations.One,
    continuations.PerSlot,
    continuations.Refuse,
    continuations.Mint,
    continuations.Retract,
    continuations.Survive,
    flip_due.Drained,
    flip_due.Clock,
)


def _axes() -> dict[str, tuple[Axis, dict[Any, type[Variant]]]]:
    out: dict[str, tuple[Axis, dict[Any, type[Variant]]]] = {}
    for v in VARIANTS:
        out.setdefault(v.axis.key, (v.axis, {}))[1][v.name] = v
    for axis, designs in out.values():
        assert axis.default in designs, f"{axis.key}: default {axis.default!r} is not a design"
    return out


AXES = _axes()  # key -> (axis, {value: design})

# the counters every rank reports, in the order summary.json and the analysis frame list them
COUNTERS: tuple[Counter, ...] = tuple(c for axis, _ in AXES.values() for c in axis.counters)


def pass_steps() -> dict[str, list[type[Variant]]]:
    """Every pass step a design adds to the ordering vocabulary -> the designs that run it."""
    out: dict[str, list[type[Variant]]] = {}
    for v in VARIANTS:
        for name in v.pass_steps:
            out.setdefault(name, []).append(v)
    return out


def default(key: str) -> Any:
    """The schema's default of a switch: the design the log settled on."""
    return AXES[key][0].default


def design(cfg: Any, key: str) -> type[Variant]:
    """The design `cfg` chose on axis `key` (validation has checked it exists)."""
    return AXES[key][1][select(cfg, key)]


def refusal(cfg: Any) -> str | None:
    """The first switch that names no design, or a design that cannot mean anything under
    `cfg`: one line naming it. None when every switch is meaningful."""
    for key, (_, designs) in AXES.items():
        value = select(cfg, key)
        if value not in designs:
            names = " | ".join(spelled(n) for n in designs if n is not None)
            return f"{key}={value!r}: {names}"
    for key in AXES:
        why = design(cfg, key).refuse(cfg)
        if why is not None:
            return why
    return None


def choices(cfg: Any) -> dict[str, Any]:
    """Every switch and its numbers, flat, under the names the run store and W&B use."""
    out: dict[str, Any] = {}
    for axis, _ in AXES.values():
        out[axis.choice] = select(cfg, axis.key)
        for p in axis.params:
            out[p.choice] = select(cfg, p.key)
    return out


CHOICE_NAMES: tuple[str, ...] = tuple(
    name for axis, _ in AXES.values() for name in (axis.choice, *(p.choice for p in axis.params))
)

V = TypeVar("V", bound=Variant)


class Protocol:
    """The designs one rank runs: an instance of the chosen variant of every axis (each keeps
    its own state and counters). The engine asks `of(Base)` and calls the hooks."""

    def __init__(self, cfg: Any) -> None:
        self.chosen: dict[type[Variant], Variant] = {}
        for key in AXES:
            cls = design(cfg, key)
            self.chosen[_base(cls)] = cls(cfg)

    def of(self, base: type[V]) -> V:
        chosen = self.chosen[base]
        assert isinstance(chosen, base), f"{type(chosen).__name__} filed under {base.__name__}"
        return chosen

    def counters(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.chosen.values():
            out.update(v.counters())
        return out


def _base(cls: type[Variant]) -> type[Variant]:
    """The axis's base class: the one that sets `axis`."""
    for klass in cls.__mro__:
        if "axis" in vars(klass):
            return klass
    raise TypeError(f"{cls.__name__} belongs to no axis")
