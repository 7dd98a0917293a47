"""`engine.admission.follower_seats`: whether a follower's own seat count vetoes a forwarded
schedule (sgl-project#1153, F2 TRIGGER CLASS).

The log's follower ran its rank-local seat-count gates (the sgl-project#823 count arm, its
`batch_full_break`, `get_num_allocatable_reqs`) on rank 0's forwarded schedule. The count was
rank-local (`admission_limiter.current`), so it said "full" while the follower's allocator could
hold the rows: "PP1 reached 1 of the 2 rids PP0 named (batch_full_break)" -> a refusal -> a
void (before #1153) or a group STOP naming the numbers (after #1153's root fix). #1153 F2 then
removed the trigger class: on a forwarded schedule the follower's count is not a verdict; only
the physical allocator (POOL_SHORT here, NO_TOKEN there) still refuses.

- `ignore` (default, F2): a follower executing rank 0's decision applies no seat count.
- `veto` (the historical gates): a follower counts its seats with the arithmetic below and
  refuses the rids beyond its count (`local = SEATS_SHORT`, which teaches the guard nothing).

The seat count. ppx has no adaptive admission limiter; the nearest rank-local quantity is the
rank's own free KV slots, i.e. the pool minus what requests and the radix tree hold, *not*
counting what eviction would free (the allocator counts that). Measured before this switch
(pp=2, faults=pool_skew 400, workload=random, forwarded): on every one of 24 prefill passes
the free-slot count differed between the ranks (rank 0 ~3500 of its 4096, rank 1 2..59 of its
400: its tree fills the small pool), while `cache.available` -- what the allocator admits
against, rank 0 minus its slack -- was equal on both. Running and in-flight counts were equal
on every pass (each rank applies the same outputs before the same decision), so they cannot
be the rank-local term and are left out: rank 0's own rule is unchanged in both values.
"""

from __future__ import annotations

from omegaconf import DictConfig

from ppx.engine.guard import SEATS_SHORT

FOLLOWER_SEATS = ("ignore", "veto")
FORWARDED = ("forwarded", "row_authority")  # policies whose followers execute rank 0's schedule


def seat_limit(free_slots: int, chunk_size: int, max_batch: int) -> int:
    """Seats this rank counts for a prefill batch: one per chunk-sized run of free KV slots
    (eviction not counted), capped by the batch's seat cap."""
    return max(0, min(max_batch, free_slots // max(chunk_size, 1)))


def veto(sched, entries, rank: int) -> tuple[list[list[int]], str]:
    """The refusals a `veto` follower makes: the decision's rids beyond its own count, as
    obs rows [rank, rid, told, SEATS_SHORT], and the numbers that decided it."""
    free = len(sched.cache.free)
    seats = seat_limit(free, sched.chunk_size, sched.max_batch)
    if len(entries) <= seats:
        return [], ""
    note = (
        f"rank{rank} reached {seats} of the {len(entries)} rids rank 0 named (seat count: "
        f"min(max_batch={sched.max_batch}, free={free} // chunk={sched.chunk_size}) = {seats}; "
        f"allocator available={sched.cache.available})"
    )
    return [[rank, e.rid, e.prefix_len, SEATS_SHORT] for e in entries[seats:]], note


def validate(merged: DictConfig) -> None:
    """Raises ValueError (one line) for a follower_seats value that cannot mean anything."""
    a = merged.engine.admission
    mode = a.get("follower_seats", "ignore")
    if mode not in FOLLOWER_SEATS:
        raise ValueError(f"engine.admission.follower_seats={mode!r}: {' | '.join(FOLLOWER_SEATS)}")
    if mode == "ignore":
        return
    if a.name not in FORWARDED:
        raise ValueError(
            f"engine.admission.follower_seats={mode} needs a forwarded schedule "
            f"(engine/admission=forwarded or row_authority); engine/admission={a.name} "
            + ("has no follower" if a.name == "rank_local" else "retracts on coverage instead")
        )
    if int(merged.pp) < 2:
        raise ValueError(
            f"engine.admission.follower_seats={mode} needs pp >= 2: at pp={merged.pp} no rank "
            "executes another's schedule"
        )
