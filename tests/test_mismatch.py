"""A protocol mismatch (the two ends of one channel disagree on a message's seq or width) told
from an ordering wedge: from the blocked-on records alone (the watchdog), and in real runs
whose last rank loses one message (faults=lose_message), caught by the receiver's seq check."""

from __future__ import annotations

import pytest
from ppx_helpers import compose

from ppx.config import ConfigError
from ppx.watch.waitfor import cycle_text, find_cycle, graph, mismatch


def rec(rank, op, peer, kind, seq=0, width=-1, slot=-1):
    return {
        "rank": rank,
        "op": op,
        "peer": peer,
        "kind": kind,
        "slot": slot,
        "pass_id": 3,
        "seq": seq,
        "width": width,
        "since_s": 9.0,
    }


def test_recv_against_a_send_of_another_seq_is_a_mismatch():
    recs = [rec(0, "flush", 1, "proxy", seq=4), rec(1, "recv", 0, "proxy", seq=3)]
    assert "seq=3" in mismatch(recs) and "seq=4" in mismatch(recs)


def test_recv_against_recv_of_another_width_is_a_mismatch():
    recs = [rec(0, "recv", 1, "output", width=2), rec(1, "recv", 0, "output", width=3)]
    assert mismatch(recs) == "rank0 and rank1 both receive output with widths 2 != 3"
    same = [rec(0, "recv", 1, "output", width=2), rec(1, "recv", 0, "output", width=2)]
    assert mismatch(same) is None  # the same width both ways: an ordering wedge
    unknown = [rec(0, "recv", 1, "output", width=-1), rec(1, "recv", 0, "output", width=2)]
    assert mismatch(unknown) is None  # a receive that names no width proves nothing


def test_an_ordering_wedge_is_not_a_mismatch():
    recs = [rec(0, "flush", 1, "chain"), rec(1, "recv", 0, "decision", slot=1)]
    assert mismatch(recs) is None
    assert (
        cycle_text(find_cycle(graph(recs)))
        == "rank0 -[flush chain]-> rank1 -[recv decision slot=1]-> rank0"
    )


def test_a_rank_not_in_the_cycle_is_left_out_of_it():
    recs = [rec(0, "recv", 1, "output"), rec(1, "recv", 0, "chain"), rec(2, "recv", 1, "proxy")]
    assert (
        cycle_text(find_cycle(graph(recs))) == "rank0 -[recv output]-> rank1 -[recv chain]-> rank0"
    )


# the receiver's own words: which rank, which channel, the seq it expected and the one it met
LOST_OUTPUT = "channel mismatch: rank0 expects output seq=2 from rank{last}, which sent seq=3 "


def test_a_lost_output_message_ends_a_real_run_mismatch(engine):
    s, _ = engine("+exp=micro_load", "engine.transport=gloo", "pp=2", "faults=lose_message")
    assert s["verdict"] == "mismatch"
    assert s["reason"].startswith(LOST_OUTPUT.format(last=1)), s["reason"]


def test_a_lost_message_on_the_simulator_is_the_same_mismatch(engine):
    s, _ = engine("+exp=micro_load", "pp=3", "faults=lose_message", "faults.lose.rank=2")
    assert s["verdict"] == "mismatch"
    assert s["reason"].startswith(LOST_OUTPUT.format(last=2)), s["reason"]


def test_an_unknown_message_kind_is_a_config_error():
    with pytest.raises(ConfigError, match="faults.lose.kind='outptu': chain | proxy"):
        compose("faults=lose_message", "faults.lose.kind=outptu")
