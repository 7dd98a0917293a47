"""Who may start a host-tier load-back: every rank at its own match, or only for a rid whose
extent rank 0 published on an admitted decision (`engine.kv.load_back`).

`local` (default) is sgl-project#1046's end state: each rank loads back at its own match, the
extent derived by one shared expression, so uniformity comes from identical derivation and no
value is shipped. `admitted` is the #1040 delivery chain: a rank (rank 0 included, which
parked its own row for a lap) starts a load only for a rid whose extent a decision carried,
and the decision was built only from what the admission loop admitted. A request whose host
hit is the reason it cannot be admitted yet is skipped as pending, so no decision names it,
so no extent is published, so its load never starts: boot 8's chain (hit present -> prefetch
pending -> skipped -> empty list -> no decision -> no extent -> LOAD-BACK DEFERRED), which
#1041 tried to cut by publishing what the loop saw and #1046 removed by deleting the chain.
"""

from __future__ import annotations

LOAD_BACKS = ("local", "admitted")


class LoadBackGate:
    def __init__(self, mode: str, livelock_passes: int) -> None:
        self.gated = mode == "admitted"
        self.extents: set[int] = set()  # rids some decision published an extent for
        self.deferred = 0  # matches that found a host hit and no extent to load it with
        self.idle_passes, self.bound = 0, livelock_passes

    def may_load(self, rid: int) -> bool:
        return not self.gated or rid in self.extents

    def published(self, rids) -> None:
        """A decision named these rids: their extents reached this rank."""
        if self.gated:
            self.extents.update(rids)

    def starved(self, sched) -> str | None:
        """Rank 0, after forming a pass: a reason to stop when requests wait, nothing is in
        flight and no load is under way, for `engine.livelock_passes` passes in a row. Only
        the gated design can get here: at its own match a deferral always has a load behind
        it, which lands."""
        if not self.gated:
            return None
        host = sched.cache.host
        if (
            not sched.waiting
            or sched.num_inflight
            or any(sched.running)
            or (host is not None and host.loading)
        ):
            self.idle_passes = 0
            return None
        self.idle_passes += 1
        if self.idle_passes < self.bound:
            return None
        rids = sorted(r.rid for r in sched.waiting)[:8]
        return (
            f"load-back starved: {self.idle_passes} passes with rids {rids} waiting, nothing in "
            "flight and no load under way (engine.kv.load_back=admitted: no admitted decision "
            "names them, so no extent is published and their host hits never load)"
        )

    def counters(self) -> dict:
        return {"load_back_deferred": self.deferred}


def validate(merged) -> None:
    """Raises ValueError (one line) for a combination that cannot mean anything."""
    kv, a = merged.engine.kv, merged.engine.admission
    mode = kv.get("load_back", "local")
    if mode not in LOAD_BACKS:
        raise ValueError(f"engine.kv.load_back={mode!r}: {' | '.join(LOAD_BACKS)}")
    if mode == "local":
        return
    if not kv.host_tier:
        raise ValueError(
            f"engine.kv.load_back={mode} needs engine.kv.host_tier=true: without a host tier "
            "there is nothing to load back"
        )
    if a.name == "rank_local":
        raise ValueError(
            f"engine.kv.load_back={mode} needs a decision to publish extents: "
            "engine/admission=decision, forwarded or row_authority"
        )
    if int(merged.pp) < 2:
        raise ValueError(
            f"engine.kv.load_back={mode} needs pp >= 2: the extent is shipped from rank 0 to "
            "its followers"
        )
