"""Every green cell of the incident gallery serves oracle-clean on the hash model and on its
own model (issue 30): the hash model changes a token on every wrong, stale or permuted KV
read, where a float model with random weights often keeps its argmax (#959's survive green
served clean on `micro` and mismatched on `hash` until the hash model became head-faithful).
The red arms are the gallery's own (`python -m ppx.study incident_gallery`, run by CI's
study job), and tests/test_carry_check.py plants a carry bug the hash model must see."""

from __future__ import annotations

import pytest

from ppx.study.catalog import load_study

STUDY = load_study("incident_gallery")
GREENS = [
    (lab["incident"], cell)
    for cell, lab in zip(STUDY.expand(), STUDY.labels, strict=True)
    if lab.get("arm") == "green"
]


def _overrides(cell: dict[str, str], model: str | None) -> list[str]:
    over = [*STUDY.base, *(f"{k}={v}" for k, v in cell.items())]
    return (
        over
        if model is None
        else [o for o in over if not o.startswith("model=")] + [f"model={model}"]
    )


def test_the_gallery_has_green_cells():
    assert len(GREENS) >= 40, len(GREENS)


@pytest.mark.parametrize(
    "incident,cell", GREENS, ids=[f"{i}:{n}" for n, (i, _) in enumerate(GREENS)]
)
def test_green_cell_serves_clean_on_its_model_and_on_hash(engine, incident, cell):
    # a green either serves or ends in the named stop its fix is (#789's readiness contract)
    verdicts = {}
    for model in dict.fromkeys([cell.get("model"), "hash"]):
        s, _ = engine(*_overrides(cell, model))
        assert s["verdict"] in ("served", "stopped"), (incident, model, s["verdict"], s["reason"])
        assert s["oracle_mismatches"] == 0, (incident, model, s["reason"])
        verdicts[model or "tiny"] = (s["verdict"], s["served"], s["submitted"])
    assert len(set(verdicts.values())) == 1, (incident, verdicts)
