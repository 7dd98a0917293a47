"""Admission policies: how a slot's prefill batch is formed and agreed on across ranks.

A policy gets the rank's context (ppx/engine/context.py), not its loop, and plugs into the pass
through the hooks of `base.Policy`: `schedule` (form or prepare this pass's batch),
`send_decision` / `recv_decision` (the decision channel; no-ops for rank_local), `lap` (the
return path to rank 0) and `absorb` (a void that came back on the output ring).
"""

from __future__ import annotations


def make_policy(name: str, ctx):
    if name == "rank_local":
        from ppx.engine.admission.rank_local import RankLocal

        return RankLocal(ctx)
    if name in ("decision", "forwarded"):
        from ppx.engine.admission.decision import DecisionPolicy

        return DecisionPolicy(ctx, forwarded=name == "forwarded")
    raise ValueError(f"unknown admission policy {name!r}")
