"""Pool exhaustion is a refusal, never an exception.

The admission matrix crashed one run in ten (forwarded, on_refusal=void, pool_skew 400): a
follower admitted a told schedule its pool could not hold and raised `KV pool exhausted` in
`Scheduler.place`. The hole was the admission check: it counted the slots of the very prefix
the request was about to lock as evictable. Red arm: the pin-blind check admits, and running
the request to its end raises; green arm: the request is not admitted until it fits.
"""

from __future__ import annotations

import pytest
from ppx_helpers import upstream_rule

from ppx.core import Req
from ppx.engine.admission.prefill import LocalPrefill
from ppx.engine.cache.kv import KVCache
from ppx.engine.scheduler import Scheduler


class _Ctx:
    def __init__(self, sched):
        self.sched = sched


def _run(s: Scheduler, pol: LocalPrefill, slot: int, pass_id: int):
    b = pol.form(slot, pass_id)
    if b is None:
        return None
    s.after_launch(b)
    s.apply_output(slot, [7] * sum(e.final for e in b.entries))
    return b


def _warm() -> tuple[Scheduler, LocalPrefill, list[int]]:
    """A 40-slot pool whose tree holds a 39-token sequence, every slot of it evictable."""
    s = Scheduler(KVCache(1, 40, 1, 2, 8, 64), 1, 64, 8)
    pol = upstream_rule(_Ctx(s))
    prompt = list(range(1, 40))
    s.add([Req(0, prompt, max_new=1)])
    _run(s, pol, 0, 0)
    assert 0 not in s.reqs and s.cache.tree.evictable == 39
    return s, pol, prompt


def _reuser(prompt: list[int]) -> Req:
    # 30 tokens shared, 9 new; it will allocate 9 + 2 decode slots, and pins 30
    return Req(1, prompt[:30] + list(range(100, 109)), max_new=3)


def test_red_a_pin_blind_check_admits_and_the_pool_runs_dry(monkeypatch):
    s, pol, prompt = _warm()
    monkeypatch.setattr(Scheduler, "pin_cost", lambda self, tokens, n: 0)
    s.add([_reuser(prompt)])
    assert _run(s, pol, 0, 1) is not None  # admitted: 1 free + 39 "evictable" >= 12
    with pytest.raises(RuntimeError, match="KV pool exhausted"):
        for p in range(2, 6):
            _run(s, pol, 0, p)


def test_green_the_locked_prefix_is_part_of_the_cost():
    s, pol, prompt = _warm()
    req = _reuser(prompt)
    s.add([req])
    assert s.pin_cost(req.tokens, 30) == 30
    assert _run(s, pol, 0, 1) is None  # waits instead of over-committing
    assert s.cache.reserved == 0 and s.cache.ledger()["num_violations"] == 0


def test_the_verdict_names_the_first_failure_not_the_peer_that_saw_it_close():
    from ppx.supervisor import first_failure

    reports = [
        (
            0,
            {
                "state": "error",
                "error": "RuntimeError: Connection closed by peer",
                "failed_at": 2.5,
            },
        ),
        (1, {"state": "error", "error": "RuntimeError: KV pool exhausted", "failed_at": 1.0}),
        (2, {"state": "error", "error": "RuntimeError: Connection closed by peer"}),
    ]
    r, rep = first_failure(reports)
    assert r == 1 and "KV pool exhausted" in rep["error"]
    # rank order (what the verdict used before) would have named rank 0's closed connection
    assert "Connection closed" in reports[0][1]["error"]
