"""Flight Recorder dumps built from ppx's record, read by torch's own analyzer: the report
names the same stuck ranks as ppx's cycle (sim here; gloo in test_orderings.py)."""

from __future__ import annotations

import os
import pickle

from fr_trace import analyzer_edges, cycle_edges, torchfrtrace
from ppx_helpers import run_inproc

from ppx.core import Kind
from ppx.engine.board import Board, F, Op
from ppx.watch import flight_recorder

WEDGE = ["pp=3", "engine/admission=decision", "engine/ordering=flush_before_decision"]


def _board(wedged: bool) -> tuple[Board, list]:
    """Three ranks that exchanged two chain messages 0->1; wedged: rank 0 posted a third
    rank 1 does not take, while rank 1 waits for a decision rank 0 never sent."""
    b = Board(None, 3)
    b.sent(0)[1, Kind.CHAIN] = 3 if wedged else 2
    b.consumed(1)[0, Kind.CHAIN] = 2
    if not wedged:
        return b, [None, None, None]
    f = b.fields(1)
    f[F.BLK_PEER], f[F.BLK_KIND], f[F.BLK_SEQ], f[F.BLK_OP] = 0, Kind.DECISION, 0, Op.RECV
    f = b.fields(0)
    f[F.BLK_PEER], f[F.BLK_KIND], f[F.BLK_SEQ], f[F.BLK_OP] = 1, Kind.CHAIN, 2, Op.FLUSH
    return b, [b.blocked_on(r) for r in range(3)]


def test_dump_fields_are_the_recorders(tmp_path):
    board, records = _board(True)
    out = flight_recorder.write(str(tmp_path), board, records, "gloo")
    assert sorted(os.listdir(out)) == ["ppx_fr_0", "ppx_fr_1", "ppx_fr_2"]
    d = pickle.load(open(os.path.join(out, "ppx_fr_1"), "rb"))
    assert set(d) == {"version", "pg_config", "pg_status", "entries"}
    assert d["pg_config"]["chain:0->1"]["ranks"] == "[0, 1]"
    e = d["entries"][-1]
    assert e["profiling_name"] == "gloo:recv 1<-0" and e["state"] == "started" and e["is_p2p"]
    assert e["process_group"] == ("decision:0->1", "ppx wire") and e["p2p_seq_id"] == 0
    sent = pickle.load(open(os.path.join(out, "ppx_fr_0"), "rb"))["entries"]
    assert [(x["p2p_seq_id"], x["state"]) for x in sent] == [(0, "completed"), (1, "completed"), (2, "started")]  # fmt: skip


def test_analyzer_names_the_hand_made_wedge_and_nothing_on_a_clean_board(tmp_path):
    board, records = _board(True)
    red = torchfrtrace(flight_recorder.write(str(tmp_path / "wedged"), board, records, "gloo"))
    assert red.returncode == 0, red.stderr
    assert analyzer_edges(red.stdout + red.stderr) == {(0, 1), (1, 0)}
    board, records = _board(False)
    green = torchfrtrace(flight_recorder.write(str(tmp_path / "clean"), board, records, "gloo"))
    assert green.returncode == 0, green.stderr
    assert analyzer_edges(green.stdout + green.stderr) == set()


def test_analyzer_reads_a_gallery_wedge_on_sim(tmp_path):
    s = run_inproc(str(tmp_path), "engine.transport=sim", *WEDGE)
    assert s["verdict"] == "wedged"
    fr = os.path.join(str(tmp_path), "postmortem", "flight_recorder")
    rep = torchfrtrace(fr)
    assert rep.returncode == 0, rep.stderr
    assert cycle_edges(s["cycle"]) == {(0, 1), (1, 0)}
    assert cycle_edges(s["cycle"]) <= analyzer_edges(rep.stdout + rep.stderr)


CHILD = """
import sys, time
import torch  # imported before the recorder is asked, as in every rank
from ppx.watch import torch_fr
if sys.argv[2] == "on":
    torch_fr.enable(sys.argv[1], 0)
print("ready", flush=True)
time.sleep(30)
"""


def test_torch_recorder_dumps_on_request_from_a_parked_thread(tmp_path):
    import subprocess
    import sys

    from ppx.watch import torch_fr

    for arm in ("on", "off"):
        d = tmp_path / arm
        d.mkdir()
        p = subprocess.Popen([sys.executable, "-c", CHILD, str(d), arm], stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert p.stdout.readline().strip() == "ready"
        got = torch_fr.collect([0], str(d), str(d / "fr"), wait_s=30 if arm == "on" else 2)
        if arm == "on":  # the main thread sleeps on; the parked thread wrote torch's dump
            assert got == [0] and p.poll() is None
            assert set(pickle.load(open(d / "fr" / "torch_fr_0", "rb"))) >= {"version", "entries"}
        else:  # red arm: no parked thread, nobody to ask, no dump (and no wait for one)
            assert got == [] and not os.listdir(d / "fr")
        p.kill()
        p.wait()
