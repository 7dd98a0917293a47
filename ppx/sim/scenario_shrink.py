"""A failing scenario's first shrink: delete requests, then switch parts off (greedy, cheapest
candidates first), before Hypothesis's own shrinker gets what is left of the time.

Hypothesis shrinks the choice sequence that drew the scenario: a general search, thorough
given time, but each candidate is a whole scenario run (several schedules) and at a few
seconds a candidate, 30 s of it ran out with six requests still there (docs/simulation.md,
the zoo's shrunk sizes). Here the candidates are the ones that pay most, in the order they
cost least: the first k requests for k = 1, 2, ... (request i depends only on the seed and i,
ppx/frontend/workloads.py, so a scenario of k requests is the failing one's first k: its
other requests deleted), then each request deleted from the middle (`workload.skip`: the
others drawn as before), the same under a pool it already cuts cut further, then each part
(faults, pressure, flips, batching) back to its default, then each field of a part back to
its own, then fewer new tokens and a shorter shared prefix. A candidate is kept when it fails as the find does (`same_failure`) and is
smaller (`Scenario.size`); the pass restarts from the kept one and ends when no candidate is
kept or the time is spent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import fields, replace

from ppx.frontend.workloads import kept_source
from ppx.sim.scenario import POOL_TOKENS, PREFIX_LEN, Pressure, Scenario


def same_failure(key: str, shrinking: str) -> bool:
    """Does a candidate failing with `key` fail as the one `shrinking` does? The same failure
    key, less a trailing list of messages: a broken KV ledger says which slots broke how
    ("slot 3 both free and tree"), and the same bug with a request fewer breaks another slot
    ("... both tree and tree"); with the list the evict_locked mutant's 4 requests never
    shrank to its 3. A cycle (`-[recv ...]->`) or a livelock's repeating rows (`[(rid, told,
    local)]`) stay whole.

    A corrupted token (the oracle's mismatch) and a double-booked KV slot (the ledger's) are
    one failure read by two detectors: the ledger sees the corruption when no request has
    reused the slot before its check, the oracle when one has and read it. evict_locked's
    4-request find was the oracle's; its 3-request scenario breaks the ledger first, and with
    the two apart it never shrank below 4. A channel's mismatch (a protocol message out of
    order) is another failure."""
    return _unlisted(key) == _unlisted(shrinking)


def _unlisted(key: str) -> str:
    if re.match(r"mismatch: (oracle|ledger):", key):
        return "mismatch: corrupt KV or token"
    return re.sub(r"\['.*$", "", key)


def with_requests(sc: Scenario, k: int) -> Scenario:
    """The scenario's first `k` requests: the concurrency and the retracted rid within them."""
    load = replace(sc.load, num_requests=k, concurrency=min(sc.load.concurrency, k))
    faults = sc.faults
    if faults.retract_rid >= k:
        faults = replace(faults, retract_rid=k - 1)
    return replace(sc, load=load, faults=faults)


def without_request(sc: Scenario, j: int) -> Scenario | None:
    """`sc` less request `j`'s prompt (every copy of it under repeats), the others served as
    before; None when `j` is the request the retraction fault names. Where a bug needs
    requests 0, 2 and 3 of four, no first-k scenario fails, and this one does."""
    load, rid = sc.load, sc.faults.retract_rid
    rep = max(load.repeat_count, 1)
    srcs = [kept_source(i // rep, load.skip) for i in range(load.num_requests)]
    gone = srcs[j]
    if 0 <= rid < len(srcs) and srcs[rid] == gone:
        return None
    n = load.num_requests - srcs.count(gone)
    skip = tuple(sorted({*load.skip, gone}))
    out = replace(sc, load=replace(load, num_requests=n, concurrency=min(load.concurrency, n), skip=skip))  # fmt: skip
    if 0 <= rid < len(srcs):  # the retracted request keeps its prompt under its new rid
        moved = rid - srcs[:rid].count(gone)
        out = replace(out, faults=replace(sc.faults, retract_rid=moved))
    return out


def tighter_pools(p: Pressure) -> list[Pressure]:
    """The pressure with a pool it already cuts cut further (POOL_TOKENS below its own)."""
    out = []
    if p.pool_all > 0:
        out += [replace(p, pool_all=t) for t in sorted(POOL_TOKENS) if t < p.pool_all]
    if p.pool_rank >= 0:
        out += [replace(p, pool_tokens=t) for t in sorted(POOL_TOKENS) if t < p.pool_tokens]
    return out


def candidates(sc: Scenario) -> Iterator[Scenario]:
    """Smaller scenarios than `sc`, cheapest and biggest step first."""
    for k in range(1, sc.load.num_requests):
        yield with_requests(sc, k)
    for j in range(sc.load.num_requests - 1):  # the last one: with_requests above
        if (c := without_request(sc, j)) is not None:
            yield c
    # fewer requests under a tighter pool: a bug of pool pressure (a pin cost ignored) that
    # the deleted requests' tokens exhausted may exhaust the smaller pool with fewer
    for k in range(1, sc.load.num_requests):
        for tighter in tighter_pools(sc.pressure):
            yield replace(with_requests(sc, k), pressure=tighter)
    parts = [f.name for f in fields(sc) if f.name != "load"]
    for name in parts:  # a whole part off: the fault, the pressure, the flips, the batching
        part = getattr(sc, name)
        default = type(part)()
        if part != default:
            yield replace(sc, **{name: default})
    for name in [f.name for f in fields(sc)]:  # one field of a part back to its default
        part = getattr(sc, name)
        for f in fields(part):
            if name == "load" and f.name in ("num_requests", "concurrency"):
                continue  # the requests were tried above
            if getattr(part, f.name) != f.default:
                yield replace(sc, **{name: replace(part, **{f.name: f.default})})
    # the numbers the size counts after the requests, each lower, smallest first
    load = sc.load
    for v in range(2, load.max_new):
        yield replace(sc, load=replace(load, max_new=v))
    for v in sorted(x for x in PREFIX_LEN if x < load.prefix_len):
        yield replace(sc, load=replace(load, prefix_len=v))


def shrink_scenario(
    sc: Scenario, fails: Callable[[Scenario], bool], out_of_time: Callable[[], bool]
) -> tuple[Scenario, int]:
    """The smallest scenario the greedy pass reaches from `sc` (which fails), and the number of
    candidates it ran. `fails(c)`: c fails with the failure key being shrunk."""
    best, runs = sc, 0
    progressed = True
    while progressed and not out_of_time():
        progressed = False
        for c in candidates(best):
            if out_of_time():
                break
            if c.size() >= best.size():
                continue  # a field the size does not count: not smaller, not tried
            runs += 1
            if fails(c):
                best, progressed = c, True
                break
    return best, runs
