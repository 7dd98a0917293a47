"""A design adds a pass step without editing the loop (Variant.pass_steps / run_step): an
ordering names it like a built-in step, every rank runs it at its place in the pass, and an
ordering that names it while its axis runs another design is refused before anything spawns."""

from __future__ import annotations

import pytest

from ppx.config import ConfigError
from ppx.protocol import registry
from ppx.protocol.told_scope import Pass

KEY = "engine.admission.told_scope"
STEPS = "[chain,schedule,launch,tally,output,flush]"


class TallyPass(Pass):
    """The default told scope, plus a pass step that notes which rank ran which pass."""

    pass_steps = ("tally",)
    ran: list[tuple[int, int]] = []

    @classmethod
    def refuse(cls, cfg):
        return None  # the default design's meaning: nothing outlives its pass

    def run_step(self, name, ctx, p) -> None:
        TallyPass.ran.append((ctx.rank, p.pass_id))


@pytest.fixture
def tally(monkeypatch):
    monkeypatch.setitem(registry.AXES[KEY][1], "pass", TallyPass)
    monkeypatch.setattr(registry, "VARIANTS", (*registry.VARIANTS, TallyPass))
    TallyPass.ran = []
    return TallyPass


def test_a_design_s_pass_step_runs_on_every_rank_at_its_place(engine, tally):
    s, _ = engine(
        "pp=3", "engine.transport=sim", "model=hash", f"engine.ordering.steps={STEPS}",
        "workload.num_requests=4", "workload.max_new=3",
    )  # fmt: skip
    assert s["verdict"] == "served", s["reason"]
    assert {rank for rank, _ in tally.ran} == {0, 1, 2}
    passes = [pid for rank, pid in tally.ran if rank == 1]
    assert passes == sorted(passes) and len(passes) == len(set(passes)) > 3  # once a pass


def test_an_unknown_step_is_refused_naming_the_vocabulary(engine):
    with pytest.raises(ConfigError, match="unknown ordering step 'tally'; steps are chain"):
        engine("pp=2", "engine.transport=sim", f"engine.ordering.steps={STEPS}")


def test_a_step_whose_design_is_not_chosen_is_refused(engine, tally):
    with pytest.raises(
        ConfigError,
        match=r"pass step 'tally', which only engine.admission.told_scope=pass runs; "
        r"this config chose engine.admission.told_scope=promise",
    ):
        engine(
            "pp=2", "engine.transport=sim", "engine/admission=decision", "flip=every_2s",
            "engine.admission.told_scope=promise",
            "engine.ordering.steps=[chain,schedule,decision,launch,tally,output,lap,flush]",
        )  # fmt: skip
