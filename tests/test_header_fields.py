"""Named, owned header fields (ppx/header.py): a mechanism that carries a value on a message
declares its own word; it can never share one with another owner."""

from __future__ import annotations

import pytest

from ppx.core import Kind, Message
from ppx.engine.faults.retract import RETRACT_RID
from ppx.header import FIELDS, MAX_AUX, declare, pack
from ppx.protocol.prefetch_carrier import FLOOR_QUERY


@pytest.fixture
def lap_fields(monkeypatch):
    """The registry with the LAP kind empty, restored after the test."""
    monkeypatch.setitem(FIELDS, Kind.LAP, {})
    return FIELDS[Kind.LAP]


def test_the_engine_owns_the_decisions_first_words_and_the_floor_the_next():
    assert [f.word for f in FIELDS[Kind.DECISION].values()][:4] == [0, 1, 2, 3]
    assert FLOOR_QUERY.word == 3 and FLOOR_QUERY.owner == "engine.admission.prefetch.floor"
    msg = Message(Kind.DECISION, aux=pack(Kind.DECISION, mode=2, count=3, floor_query=9))
    assert msg.aux == (2, 3, 0, 9) and FLOOR_QUERY.of(msg) == 9


def test_a_new_field_on_the_chain_gets_its_own_word_not_the_retraction_s():
    # what an axis carrying a value on the chain does: before, it shared aux[0]
    mine = declare(Kind.CHAIN, "my_axis_value", "engine.my_axis")
    try:
        assert mine.word != RETRACT_RID.word
        msg = Message(Kind.CHAIN, aux=pack(Kind.CHAIN, retract_rid=7, my_axis_value=5))
        assert RETRACT_RID.of(msg) == 7 and mine.of(msg) == 5
    finally:
        del FIELDS[Kind.CHAIN]["my_axis_value"]


def test_a_second_owner_of_a_field_is_refused_by_name(lap_fields):
    declare(Kind.LAP, "floor_rid", "engine.admission.prefetch.floor")
    assert declare(Kind.LAP, "floor_rid", "engine.admission.prefetch.floor").word == 0
    with pytest.raises(ValueError, match="'floor_rid' is owned by engine.admission.prefetch.floor"):
        declare(Kind.LAP, "floor_rid", "faults.retract.rid")


def test_a_full_header_is_refused_naming_its_fields(lap_fields):
    for i in range(MAX_AUX):
        declare(Kind.LAP, f"w{i}", "test")
    with pytest.raises(ValueError, match=r"lap header is full \(4 words: w0, w1, w2, w3\)"):
        declare(Kind.LAP, "one_more", "test")


def test_packing_an_undeclared_field_is_refused():
    with pytest.raises(KeyError, match="no field"):
        pack(Kind.CHAIN, retract=1)
