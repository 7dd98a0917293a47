"""The engine's hot paths may get faster, never different: N random schedules of a few configs,
each schedule's choices and its end (ppx/sim/ends.py: every request's tokens, the order of
commits, the verdict and reason key) pinned to the values main's code gave before the speed
work of issue 31 (recorded at 4d7576b). A change that alters any schedule -- the tasks
chosen, a token, the commit order, a verdict -- fails here, naming the config and the seeds.

Red arm: a one-step change to the engine (every request asks for one token less)
must move the pinned ends.

A change of behaviour that is meant (a protocol fix) re-records the values:
`PYTHONPATH=. python tests/sim/test_schedule_ends_pinned.py` prints the table to paste.
"""

from __future__ import annotations

import hashlib
import sys

import pytest

SEEDS = 12
CONFIGS = {
    # the explorer's defaults (the command): rank_local admission, upstream ordering
    "default": ["pp=3"],
    # the decision policy, decision_first, six requests three at a time
    "decision_first": ["pp=3", "engine/admission=decision", "engine/ordering=decision_first",
                       "workload.num_requests=6", "workload.concurrency=3"],
    # phase flips every 4 passes, the in-flight slots voided (flips, cutovers, retractions)
    "flip": ["pp=3", "flip.enabled=true", "flip.every_s=0.0", "flip.every_passes=4",
             "flip.max_flips=2"],
    # faults: rank 1's KV pool too small (stopped), a lost output message (mismatch), a slow
    # rank under a six-request load in a small pool (served)
    "pool_skew": ["pp=3", "faults=pool_skew", "faults.pool.tokens=40"],
    "lose_message": ["pp=3", "faults=lose_message", "faults.lose.rank=2"],
    "slow_rank": ["pp=3", "faults=slow_rank", "workload.num_requests=6",
                  "workload.concurrency=6", "engine.kv.pool_tokens=64"],
    # voids and retractions: rank 1's pool too small for two shared prefixes, the rid guard
    # (the gallery's #791b void ring green)
    "voids": ["pp=2", "engine/ordering=decision_first", "engine/admission=decision",
              "engine/guard=rid", "faults=pool_skew", "faults.pool.tokens=64",
              "workload.num_prefixes=2", "workload.prefix_len=24", "workload.num_requests=6",
              "workload.concurrency=1", "workload.max_new=8", "seed=2"],
    # a wedge (the gallery's blocking_lap red)
    "blocking_lap": ["pp=3", "engine/admission=decision", "engine/ordering=blocking_lap"],
    # a real (tiny) transformer instead of the hash model: the tensors' own path
    "micro": ["pp=3", "model=micro", "workload.num_requests=2", "workload.max_new=2"],
}  # fmt: skip
PINNED = {  # main at 4d7576b, before the speed work
    "default": "c6efd2ae0b100bb5",  # ['served']
    "decision_first": "cdb6c6bcb6bb3569",  # ['served']
    "flip": "9bd5415d080483f2",  # ['served']
    # re-recorded when the failure key began to write a list of numbers as `[#, ...]`
    # (runner.failure_key): the stop names both batches' rids; with the old key the digest is
    # 4d7576b's 7f654ce30e45f9ab, the choices, tokens and verdicts unchanged
    "pool_skew": "ff769617c81a77d4",  # ['stopped']
    "lose_message": "59b48d9eec8567c7",  # ['mismatch']
    "slow_rank": "b8af74d33029f7d4",  # ['served']
    "voids": "7ba9d87af6edd8e4",  # ['served']
    "blocking_lap": "f4bc047625da41ec",  # ['wedged']
    "micro": "02b02100b4083a68",  # ['served']
}


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def schedule_ends(name: str) -> list[str]:
    """Per seed: the digest of its choices, its end, verdict, steps, virtual time, counters."""
    from explore_helpers import explorer_cfg

    from ppx.sim.runner import Runner
    from ppx.sim.strategy import RandomStrategy

    runner = Runner(explorer_cfg(*CONFIGS[name], "explore.shrinker.runs=0"))
    out = []
    for seed in range(SEEDS):
        res = runner.run(RandomStrategy(seed))
        row = res.row
        out.append(
            f"{_digest(repr(res.choices))}:{row['end']}:{res.verdict}:{row['steps']}:"
            f"{row['virtual_s']}:{_digest(repr(sorted(res.counters.items())))}"
        )
    return out


@pytest.mark.parametrize("name", list(CONFIGS))
def test_random_schedules_keep_their_pinned_ends(name):
    got = schedule_ends(name)
    assert _digest(";".join(got)) == PINNED[name], (name, got)


def test_one_token_less_per_request_moves_the_pinned_ends(monkeypatch):
    """Red arm: the frontend asks every request for one token less -- the pins must see it."""
    from ppx.frontend import driver

    real = driver.Driver._submit

    def one_less(self, now):
        put = self.in_q.put
        self.in_q.put = lambda item: put((item[0], item[1], item[2] - 1))
        try:
            real(self, now)
        finally:
            self.in_q.put = put

    monkeypatch.setattr(driver.Driver, "_submit", one_less)
    assert _digest(";".join(schedule_ends("default"))) != PINNED["default"]


if __name__ == "__main__":
    sys.path.insert(0, "tests")
    sys.path.insert(0, "tests/sim")
    for name in CONFIGS:
        ends = schedule_ends(name)
        verdicts = sorted({e.split(":")[2] for e in ends})
        print(f'    "{name}": "{_digest(";".join(ends))}",  # {verdicts}')
