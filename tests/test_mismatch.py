"""The watchdog tells a protocol mismatch (both ends of one channel, different seq or width)
from an ordering wedge, from the blocked-on records alone."""

from __future__ import annotations

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
