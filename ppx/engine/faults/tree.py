"""faults.drop_rank / faults.drop_pass: after pass `drop_pass`, rank `drop_rank` evicts every
cached prefix no request holds (a rank-local cache loss its peers do not share).

The mirror of sgl-project#963's specimen, where one rank alone GAINED a prefix (a rank-local
prefetch verdict stashed it in its tree): either way rank 0 holds a prefix a follower does
not, rank 0 offers it, the follower measures a shortfall honestly, and every request over
that prefix starts from the same unhonourable told until the group serves the prefix again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def tree_drop(cfg: Any, rank: int) -> Callable[[int, Any], None]:
    """What this rank does with its cache after each pass: nothing, unless it is the rank
    that drops its tree, at the pass it drops it."""
    f = cfg.faults
    if int(f.drop_rank) != rank:
        return lambda pass_id, cache: None
    at = int(f.drop_pass)

    def drop(pass_id: int, cache) -> None:
        if pass_id == at:
            cache.drop_unlocked()

    return drop
