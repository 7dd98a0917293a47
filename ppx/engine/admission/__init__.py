"""Admission policies: how a slot's prefill batch is formed and agreed on across ranks.

A policy gets the rank's context (ppx/engine/context.py) and the protocol designs the config
chose (ppx/protocol), not the loop, and plugs into the pass through the hooks of
`base.Policy`: `schedule` (form or prepare this pass's batch), `send_decision` /
`recv_decision` (the decision channel; no-ops for rank_local), `lap` (the return path to rank
0) and `absorb` (a void that came back on the output ring).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.protocol.continuations import SecondContinuation
from ppx.protocol.policy import Policy as PolicyDesign

if TYPE_CHECKING:
    from ppx.engine.admission.base import Policy
    from ppx.engine.context import RankContext
    from ppx.protocol.registry import Protocol


def make_policy(ctx: RankContext, proto: Protocol) -> Policy:
    """rank_local forms its own batches; every design whose decision travels is one policy,
    told apart by the design's traits (executes, never_voids) and the designs it holds."""
    if not proto.of(PolicyDesign).decides:
        from ppx.engine.admission.rank_local import RankLocal

        policy: Policy = RankLocal(ctx)
    else:
        from ppx.engine.admission.decision import DecisionPolicy

        policy = DecisionPolicy(ctx, proto)
    policy.second = proto.of(SecondContinuation)
    return policy
