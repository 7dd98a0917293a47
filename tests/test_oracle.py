"""The oracle caught in the act: `Oracle.check` on hand-built outputs of the micro model, and
a real run whose last rank sends one wrong token (faults=corrupt_token) ending `mismatch`."""

from __future__ import annotations

import pytest
from ppx_helpers import compose

from ppx.engine.shapes import dims_of
from ppx.oracle import Oracle

PROMPT = [3, 17, 42, 9, 77, 5]


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle(dims_of(compose("model=micro")), seed=0)


def greedy(o: Oracle, prompt: list[int], n: int, force: dict[int, int] | None = None) -> list:
    """The reference's own greedy continuation; `force` puts a given id at a position (the
    tokens after it are the greedy ones for the forced context, as a consistent engine's)."""
    out: list[int] = []
    for t in range(n):
        tok = int(o.ref.logits(prompt + out)[-1].argmax())
        out.append((force or {}).get(t, tok))
    return out


def margins(o: Oracle, prompt: list[int], out: list[int], t: int) -> tuple[int, float]:
    """The runner-up id at output position t and its distance below the greedy choice."""
    row = o.ref.logits(prompt + out[:t])[-1]
    top = row.topk(2)
    return int(top.indices[1]), float(top.values[0] - top.values[1])


def test_the_reference_greedy_output_has_no_mismatch(oracle):
    out = greedy(oracle, PROMPT, 8)
    assert oracle.check(PROMPT, out, rid=7) == []


def test_one_changed_token_is_one_mismatch_naming_rid_and_position(oracle):
    clean = greedy(oracle, PROMPT, 8)
    wrong = (clean[3] + 1) % oracle.ref.d.vocab
    out = greedy(oracle, PROMPT, 8, force={3: wrong})
    found = oracle.check(PROMPT, out, rid=7)
    assert [(m.rid, m.position, m.expected, m.got) for m in found] == [(7, 3, clean[3], wrong)]
    assert str(found[0]).startswith(f"rid 7 token 3: expected {clean[3]}, got {wrong}")


def test_a_near_tie_is_tolerated_and_a_clear_choice_is_not(oracle):
    clean = greedy(oracle, PROMPT, 8)
    second, gap = margins(oracle, PROMPT, clean, 2)
    out = greedy(oracle, PROMPT, 8, force={2: second})
    # the same runner-up token: inside the tolerance it is a near-tie, outside a mismatch
    assert Oracle(dims_of(compose("model=micro")), 0, tol=gap * 1.01).check(PROMPT, out) == []
    strict = Oracle(dims_of(compose("model=micro")), 0, tol=gap * 0.99).check(PROMPT, out)
    assert [m.position for m in strict] == [2]


def test_a_wrong_token_from_the_engine_ends_the_run_mismatch(engine):
    s, _ = engine(
        "+exp=micro_load", "engine.transport=gloo", "pp=2", "faults=corrupt_token",
        "faults.corrupt.rid=2", "faults.corrupt.position=1",
    )  # fmt: skip
    assert s["verdict"] == "mismatch"
    assert s["reason"].startswith("oracle: rid 2 token 1: expected ")
    assert s["oracle_mismatches"] == 1 and s["served"] == s["submitted"] - 1


def test_a_corrupt_rank_that_does_not_sample_is_a_config_error():
    from ppx.config import ConfigError

    with pytest.raises(ConfigError, match="faults.corrupt.rank=0: tokens are sampled"):
        compose("pp=2", "faults=corrupt_token", "faults.corrupt.rank=0")
