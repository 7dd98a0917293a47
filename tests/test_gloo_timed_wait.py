"""The gloo timed wait (sgl-project#829), over three real gloo processes.

Red: rank 0 gives its receive a deadline inside gloo (`work.wait(timeout=...)`, how
sgl-project#630's bounded wait did it). The wait times out, and every pair rank 0 holds is
closed: the late sender (rank 1) and a healthy third rank (rank 2) both get `Connection
closed by peer`, and rank 0 reads "Application timeout caused pair closure" on each.
Green: the same deadline kept in Python (the untimed wait parked in a thread the caller
stops waiting for): the late message still lands and every pair keeps working.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os

import gloo_wait_procs
import pytest

from ppx.supervisor import free_port


def _run(arm: str, tmp_path) -> list[dict]:
    out = str(tmp_path / f"{arm}%d.json")
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [
        ctx.Process(target=gloo_wait_procs.worker, args=(r, 3, port, arm, out), daemon=True)
        for r in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    missing = [r for r in range(3) if not os.path.exists(out % r)]
    assert not missing, f"ranks {missing} wrote no result"
    return [json.load(open(out % r)) for r in range(3)]


@pytest.mark.parametrize("arm", ["timed", "python"])
def test_a_deadline_inside_gloo_closes_healthy_pairs_a_deadline_in_python_does_not(arm, tmp_path):
    r0, r1, r2 = _run(arm, tmp_path)
    if arm == "timed":  # red
        assert "Timed out waiting" in r0["first"]
        assert "pair closure" in r0["again_1"] and "pair closure" in r0["again_2"]
        assert "Connection closed by peer" in r1["late_send"]
        assert "Connection closed by peer" in r2["send_2"]  # rank 2 never waited on anyone
    else:  # green
        assert r0["first"] == "hung"  # the caller gave up at its Python deadline
        assert r0["gave_up_after_s"] < gloo_wait_procs.LATE_S
        assert r1["late_send"] == r1["again_send"] == "ok"
        assert r0["again_1"] == r0["again_2"] == r2["send_2"] == "ok"
