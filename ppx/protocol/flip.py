"""The phase flip's designs (`flip.*`): what happens to the slots in flight, when the epoch
moves, and what crosses the TP->PP seam. The cutover itself is ppx/engine/flip.py.
"""

from __future__ import annotations

from typing import Any

from ppx.protocol.axis import Axis, Counter, Variant
from ppx.protocol.told_scope import Pass

INFLIGHT = Axis(
    "flip.inflight",
    "inflight",
    "what a flip does with the slots in flight when it is announced",
    default="drain",
    counters=(
        Counter("flips", group=True),
        Counter("retracted_at_flip", group=True),
        Counter("reprefill_tokens", group=True),
        # batches a flip.inflight=void flip voided (every rank voids the same ones)
        Counter("flip_voided", group=True),
    ),
)
START = Axis("flip.start_phase", "start_phase", "the phase a flipping run starts in", "pp")
EPOCH_ADVANCE = Axis(
    "flip.epoch_advance",
    "epoch_advance",
    "when a cutover moves the epoch: before or after the residents' re-admission",
    default="release",
)
SEAM_TAIL = Axis(
    "flip.seam_tail",
    "seam_tail",
    "who keeps the token the TP phase's last batch sampled across the TP->PP seam",
    default="shared",
    counters=(Counter("seam_tails_lost", group=True),),
)


def needs_flips(switch: str, cfg: Any, what: str) -> str | None:
    if cfg.flip.enabled:
        return None
    return f"{switch} means nothing without flips: {what} (set flip=...)"


class Inflight(Variant):
    axis = INFLIGHT
    voids_inflight = False  # the slots in flight come back as voids, their requests re-queued


class Drain(Inflight):
    name = "drain"
    ref = "the log's cutover"
    about = "the slots in flight finish; their residents are retracted at the cutover"


class VoidInflight(Inflight):
    name = "void"
    ref = "the log's cutover (void mode)"
    about = "the slots in flight are voided and re-queued"
    voids_inflight = True


class StartPhase(Variant):
    axis = START


class StartPP(StartPhase):
    name = "pp"
    about = "start in the PP phase"


class StartTP(StartPhase):
    name = "tp"
    about = "start in the TP phase"


class EpochAdvance(Variant):
    axis = EPOCH_ADVANCE
    at_release = True  # the epoch moves before the residents' re-admission


class Release(EpochAdvance):
    name = "release"
    ref = "ppx's cutover"
    about = "the epoch moves as the residents are released, before their re-admission"


class Completion(EpochAdvance):
    name = "completion"
    ref = "sgl-project#1061b (PhaseFlipRuntime._epoch, boot 31)"
    about = "the epoch moves at cutover completion: the re-admission runs in the old epoch"
    at_release = False

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        why = needs_flips(cls.switch(), cfg, "the epoch moves only at a TP<->PP cutover")
        if why is not None:
            return why
        if cfg.engine.admission.told_scope == Pass.name:
            return (
                f"{cls.switch()} is read only by a told row re-admitted at the cutover, and "
                "engine.admission.told_scope=pass stamps none (promise | epoch | epoch_retract)"
            )
        return None


class SeamTail(Variant):
    axis = SEAM_TAIL
    rank0_only = False  # the TP tail stays on rank 0: a follower's fill is one token short


class Shared(SeamTail):
    name = "shared"
    ref = "sgl-project#987 (fill_len + fill tail published with the entry)"
    about = "every rank appends the TP phase's last sampled token"


class Rank0Local(SeamTail):
    name = "rank0_local"
    ref = "before sgl-project#987 (8447 vs 8446)"
    about = "only rank 0 keeps it; a follower's fill is one token short"
    rank0_only = True

    @classmethod
    def refuse(cls, cfg: Any) -> str | None:
        f = cfg.flip
        why = needs_flips(cls.switch(), cfg, "the tail is lost only at a TP->PP cutover")
        if why is not None:
            return why
        if int(cfg.pp) < 2:
            return (
                f"{cls.switch()} needs pp >= 2: with one rank there is no follower to lack "
                "rank 0's tail"
            )
        if f.max_flips == 1 and f.start_phase == StartPP.name:
            return (
                f"{cls.switch()} with flip.max_flips=1 from the PP phase never crosses the "
                "TP->PP seam (set flip.start_phase=tp or more flips)"
            )
        return None
