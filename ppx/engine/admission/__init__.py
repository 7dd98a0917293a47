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
    if name in ("decision", "forwarded", "row_authority"):
        from ppx.engine.admission.decision import DecisionPolicy

        # row authority (sgl-project#1071, the entry after it, #1153) is forwarded execution
        # with no retraction and no void: validation pins on_refusal=stop and guard=off
        policy = DecisionPolicy(ctx, forwarded=name != "decision")
        policy.name = name
        return policy
    raise ValueError(f"unknown admission policy {name!r}")
