"""Protocol switches that cannot mean anything together are refused before anything spawns.

Each check raises a ValueError of one line naming the switch, the value and why;
`ppx.validation.validate` turns it into a ConfigError (exit 2). The engine does not import the
config layer.
"""

from __future__ import annotations

from omegaconf import DictConfig

from ppx.engine.admission import load_back, prefetch_floor, reconcile, seats
from ppx.engine.admission.told_rows import SCOPES

# which policy reads which switch: a switch set for a policy that ignores it is a config the
# researcher believes tests something it does not (today's `decision` ignored on_refusal=stop)
ON_REFUSAL = ("void", "stop")


def validate_protocol(merged: DictConfig) -> None:
    """Raises ValueError naming the first switch that cannot mean anything here."""
    a, g = merged.engine.admission, merged.engine.guard
    if merged.engine.width_check not in ("fingerprint", "rows"):
        raise ValueError(f"engine.width_check={merged.engine.width_check!r}: fingerprint | rows")
    if g.name not in ("off", "rid", "prefix"):
        raise ValueError(f"engine.guard.name={g.name!r}: off | rid | prefix")
    if a.name == "row_authority":
        # the log's end state: rank 0's rows are the only truth, followers never retract,
        # an unexecutable row is a group STOP
        if a.on_refusal != "stop":
            raise ValueError(
                f"engine.admission.on_refusal={a.on_refusal}: engine/admission=row_authority "
                "never voids (an unexecutable row is a group STOP, sgl-project#1153)"
            )
        if g.name != "off":
            raise ValueError(
                f"engine/guard={g.name} learns from retractions, which "
                "engine/admission=row_authority never makes (sgl-project#1071)"
            )
    elif a.name == "forwarded":
        if a.on_refusal not in ON_REFUSAL:
            raise ValueError(f"engine.admission.on_refusal={a.on_refusal!r}: void | stop")
    elif a.on_refusal is not None:
        why = (
            "a retraction always voids the pass (use engine/admission=forwarded to choose)"
            if a.name == "decision"
            else "it has no refusals: every rank forms its own batch"
        )
        raise ValueError(
            f"engine.admission.on_refusal={a.on_refusal} is ignored by "
            f"engine/admission={a.name}: {why}"
        )
    if a.told_scope not in SCOPES:
        raise ValueError(f"engine.admission.told_scope={a.told_scope!r}: {' | '.join(SCOPES)}")
    if a.told_scope != "pass":
        if a.name == "rank_local":
            raise ValueError(
                f"engine.admission.told_scope={a.told_scope} needs a decision to stamp: "
                "engine/admission=decision or forwarded"
            )
        if not merged.flip.enabled:
            raise ValueError(
                f"engine.admission.told_scope={a.told_scope} means nothing without flips: a told "
                "row outlives its pass only across a TP<->PP cutover (set flip=...)"
            )
    if a.geometry not in ("told", "rederive"):
        raise ValueError(f"engine.admission.geometry={a.geometry!r}: told | rederive")
    if a.geometry == "rederive" and a.name != "decision":
        raise ValueError(
            f"engine.admission.geometry=rederive is a design of engine/admission=decision "
            f"(engine/admission={a.name} "
            + (
                "executes rank 0's lengths by definition)"
                if a.name == "forwarded"
                else "has no told)"
            )
        )
    validate_batch_order(a, int(merged.pp))
    reconcile.validate(a, int(merged.pp))
    prefetch_floor.validate(merged)  # sgl-project#1175: group | rank0
    load_back.validate(merged)  # sgl-project#1040/#1046: admitted | local
    seats.validate(merged)  # sgl-project#1153 F2: ignore | veto
    if g.miss not in ("sentinel", "zero"):
        raise ValueError(f"engine.guard.miss={g.miss!r}: sentinel | zero")
    validate_defer_streak(g)
    if g.prefix_clear not in ("serve", "never"):
        raise ValueError(f"engine.guard.prefix_clear={g.prefix_clear!r}: serve | never")
    if g.prefix_clear != "serve" and g.name != "prefix":
        raise ValueError(
            f"engine.guard.prefix_clear={g.prefix_clear} needs engine/guard=prefix "
            f"(engine/guard={g.name} keeps no prefix floors)"
        )


def validate_defer_streak(g) -> None:
    """engine.guard.defer_streak: what the per-rid unresolved streak is keyed on (#944 / #987)."""
    streak = g.get("defer_streak", "refusal")
    if streak not in ("refusal", "offer"):
        raise ValueError(f"engine.guard.defer_streak={streak!r}: refusal | offer")
    if streak == "refusal":
        return
    if g.name == "off":
        raise ValueError(
            "engine.guard.defer_streak=offer means nothing: engine/guard=off counts no streak"
        )
    if int(g.defer_cap) <= 0:
        raise ValueError(
            f"engine.guard.defer_streak=offer means nothing with engine.guard.defer_cap="
            f"{g.defer_cap}: the bound is disabled, so no streak is counted toward it"
        )
    if g.miss == "zero":
        raise ValueError(
            "engine.guard.defer_streak=offer means nothing with engine.guard.miss=zero: "
            "no rank ever reports unresolved, so the streak never counts"
        )


def validate_batch_order(a, pp: int) -> None:
    """engine.admission.batch_order=queue: a follower sorts rank 0's decision into its own
    queue order, so it needs a decision to sort and a follower to sort it."""
    order = getattr(a, "batch_order", "decision")
    if order not in ("decision", "queue"):
        raise ValueError(f"engine.admission.batch_order={order!r}: decision | queue")
    if order == "decision":
        return
    if a.name not in ("decision", "forwarded"):
        why = (
            "executes rank 0's rows verbatim, order included"
            if a.name == "row_authority"
            else "has no decision to reorder"
        )
        raise ValueError(f"engine.admission.batch_order=queue means nothing: {a.name} {why}")
    if pp < 2:
        raise ValueError(
            "engine.admission.batch_order=queue needs pp >= 2: with one rank there is no "
            "follower to reorder rank 0's decision"
        )
