"""Admission policies: how a slot's prefill batch is formed and agreed on across ranks.

A policy plugs into the pass loop through four hooks: `schedule` (form or prepare this pass's
batch), `send_decision` / `recv_decision` (the decision channel; no-ops for rank_local) and
`on_output` (rank 0 absorbs what came back, e.g. a void). See `base.Policy`.
"""

from __future__ import annotations


def make_policy(name: str, loop):
    if name == "rank_local":
        from ppx.engine.admission.rank_local import RankLocal

        return RankLocal(loop)
    if name in ("decision", "forwarded"):
        from ppx.engine.admission.decision import DecisionPolicy

        return DecisionPolicy(loop, forwarded=name == "forwarded")
    raise ValueError(f"unknown admission policy {name!r}")
