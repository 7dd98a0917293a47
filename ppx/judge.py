"""What a served run still has to pass: the oracle's tokens, then the KV ledger.

A run the ranks end as `served` is judged twice more, by a real run (ppx/run.py) and by the
explorer (ppx/sim/runner.py) alike: a wrong token makes it `mismatch` (`oracle: ...`), and so
does a KV ledger that broke (`ledger: ...`): every rank checks that each pool slot is free,
the tree's or one request's at every idle point and at teardown (KVCache.ledger). A slot owned
twice or by nobody serves every token right until the pool runs dry; a scenario of six
requests ends long before that, so the ledger, not the tokens, is what shows the leak.
"""

from __future__ import annotations

LEDGER = "ledger: "  # the reason's prefix


def ledger_breach(reports: dict) -> str | None:
    """The first rank whose KV ledger broke, with what broke; None when every ledger held."""
    for rank in sorted(reports):
        rep = reports[rank] or {}
        n = int(rep.get("ledger_violations") or 0)
        if n:
            seen = (rep.get("ledger") or {}).get("violations") or []
            return f"{LEDGER}rank{rank} {n} violations, {seen[:2]}"
    return None


def judge_served(verdict: str, reason: str, mismatches: list, reports: dict) -> tuple[str, str]:
    """The verdict and reason of a run after the oracle and the ledger."""
    if verdict != "served":
        return verdict, reason
    if mismatches:
        return "mismatch", f"oracle: {mismatches[0]}"
    breach = ledger_breach(reports)
    if breach is not None:
        return "mismatch", breach
    return verdict, reason
