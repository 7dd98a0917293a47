"""Guard floors, the decision codec, and the prefix key's stability across processes."""

from __future__ import annotations

import subprocess
import sys

import torch
from ppx_helpers import make_guard

from ppx.core import UNRESOLVED, Entry
from ppx.engine.admission import codec
from ppx.protocol.guard.floors import prefix_key


def test_rid_floor_clamps_and_strictly_decreases_per_retraction():
    g = make_guard("rid", defer_cap=3)
    toks = list(range(50))
    told = g.clamp(7, toks, 40)
    floors = []
    for local in (30, 12, 0):  # each retraction reports less coverage than it was told
        assert local < told
        g.learn(7, toks, told, local)
        told = g.clamp(7, toks, 40)
        floors.append(told)
    assert floors == [30, 12, 0] and all(a > b for a, b in zip(floors, floors[1:]))
    g.served(7)
    assert g.clamp(7, toks, 40) == 40  # a clean return clears the floor


def test_guard_off_never_clamps():
    g = make_guard("off", defer_cap=3)
    g.learn(1, [1, 2, 3], 3, 0)
    assert g.clamp(1, [1, 2, 3], 3) == 3 and g.floors.learned == 0


def test_prefix_floor_clamps_new_requests_over_the_same_prefix():
    g = make_guard("prefix", defer_cap=3)
    shared = list(range(100, 124))
    g.learn(1, shared + [1, 2], told=24, local=0)
    assert g.clamp(2, shared + [9, 9, 9], 24) == 0  # a new rid, same offered prefix
    assert g.clamp(3, list(range(24)) + [5], 24) == 24  # another prefix is untouched
    rid = make_guard("rid", defer_cap=3)
    rid.learn(1, shared + [1, 2], told=24, local=0)
    assert rid.clamp(2, shared + [9, 9, 9], 24) == 24  # the rid guard learns per request


def test_unresolved_is_counted_not_measured_and_the_defer_cap_escalates():
    g = make_guard("rid", defer_cap=2)
    toks = list(range(30))
    outcomes = []
    for _ in range(4):
        g.learn(5, toks, 20, UNRESOLVED)
        outcomes.append(g.clamp(5, toks, 20))  # deferred for one round...
        outcomes.append(g.clamp(5, toks, 20))  # ...then offered again
    assert g.n.unresolved == 4 and g.floors.learned == 0
    # at the cap (the 2nd unresolved round, sgl-project#944's "told=0 on the 4th offer" for a
    # cap of 3): told = 0, which every rank can honour, from then on
    assert outcomes[:4] == [None, 20, 0, 0]
    assert outcomes[-1] == 0


def test_codec_roundtrip_and_a_narrow_reader_decodes_a_wider_row():
    entries = [Entry(3, 10, 5, True), Entry(8, 64, 64, False, continues=True)]
    assert codec.decode(codec.encode(entries)) == entries
    wide = codec.encode(entries, extra=[[77, 1], [78, 2]])  # a newer writer added columns
    assert wide.shape == (2, 7) and codec.decode(wide) == entries
    older = codec.encode(entries)[:, :4]  # a writer from before `continues`
    assert [e.continues for e in codec.decode(older)] == [False, False]
    assert codec.decode(codec.encode([])) == []


def test_codec_rejects_a_row_narrower_than_it_knows():
    try:
        codec.decode(torch.zeros((2, 3), dtype=torch.int64))
    except ValueError as e:
        assert "columns" in str(e)
    else:
        raise AssertionError("a 3-column decision decoded")


def _in_process(seed: str, expr: str) -> str:
    code = f"from ppx.protocol.guard.floors import prefix_key; print({expr})"
    env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}
    import os

    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout


def test_prefix_key_is_equal_across_processes_with_different_hash_seeds():
    key = "prefix_key([5, 6, 7, 8], 3)"
    assert _in_process("1", key) == _in_process("2", key) == prefix_key([5, 6, 7, 8], 3) + "\n"
    # red arm: what Python's hash() would have given is salted per process
    salted = "hash(('p', 5, 6, 7))"
    assert _in_process("1", salted) != _in_process("2", salted)
