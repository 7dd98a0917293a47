"""How a schedule ended, as values two searches can compare: the end record.

A schedule's end is more than its verdict: two schedules that both serve may commit other
tokens, or the same tokens in another order. The record keeps, per schedule,

- `end_tokens`: a digest of every request's outcome and token ids, by rid;
- `end_commits`: a digest of the order the frontend received them in (every item rank 0
  put on the output queue: a token of rid r, or r's refusal);
- `reason_key`: the failure key (verdict and cycle, or the reason with numbers blanked:
  runner.failure_key), "served: " for a served run;
- `end`: the three together, the schedule's end as one value.

Two strategies' sets of `end` values are equal exactly when they reached the same
outcomes in the same commit orders with the same verdicts (tests/sim/test_exhaustive_ends.py
compares plain, reduced and cached exhaustive search this way).
"""

from __future__ import annotations

import hashlib

END_COLUMNS = ["end", "end_tokens", "end_commits", "reason_key"]


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def end_record(driver, committed: list, reason_key: str) -> dict:
    """The end record of one run: its driver's records, the items rank 0 committed to the
    frontend in order (`SimQueue.history` of the output queue) and its failure key."""
    tokens = ";".join(
        f"{rid}:{rec.outcome}:{','.join(map(str, rec.output))}"
        for rid, rec in sorted(driver.records.items())
    )
    commits = ",".join(f"{item[0][0]}{item[1]}" for batch in committed for item in batch)
    t, c = _digest(tokens), _digest(commits)
    return {
        "end": _digest(f"{t}|{c}|{reason_key}"),
        "end_tokens": t,
        "end_commits": c,
        "reason_key": reason_key,
    }
