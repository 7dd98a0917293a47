"""Workers for the gloo timed-wait test (spawned processes import this module).

Rank 0 waits for a message rank 1 sends late. `timed` puts the deadline INTO the gloo work
(`work.wait(timeout=...)`, the sgl-project#630 design withdrawn by #829); `python` parks the
untimed wait in a thread and gives up on it by joining the thread with a deadline (ppx's
rule: deadlines live in Python). After the deadline both arms exchange again over the same
pair: the question is whether the pair survived.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time

import torch
import torch.distributed as dist

LATE_S = 1.5  # rank 1 sends this late; rank 0 gives up after DEADLINE_S
DEADLINE_S = 0.5


def _bounded(fn, limit_s: float) -> str:
    """Run fn in a thread; 'ok', 'hung' or the exception's first line."""
    box: list[str] = []

    def run():
        try:
            fn()
            box.append("ok")
        except Exception as e:  # noqa: BLE001 - the failure is the measurement
            box.append(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit_s)
    return box[0] if box else "hung"


def worker(rank: int, world: int, port: int, arm: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=20),
    )
    res: dict = {"arm": arm}
    buf = torch.zeros(4)
    if rank == 0:
        work = dist.irecv(buf, src=1, tag=1)
        t0 = time.time()
        if arm == "timed":
            res["first"] = _bounded(
                lambda: work.wait(timeout=datetime.timedelta(seconds=DEADLINE_S)), 5
            )
        else:
            res["first"] = _bounded(work.wait, DEADLINE_S)  # 'hung' = the caller gave up
        res["gave_up_after_s"] = round(time.time() - t0, 2)
        time.sleep(LATE_S + 0.5)  # rank 1 has sent by now
        # the same pair again, and a pair with a healthy third rank
        res["again_1"] = _bounded(lambda: dist.recv(torch.zeros(4), src=1, tag=2), 5)
        res["again_2"] = _bounded(lambda: dist.recv(torch.zeros(4), src=2, tag=3), 5)
    elif rank == 1:
        time.sleep(LATE_S)
        res["late_send"] = _bounded(lambda: dist.send(torch.ones(4), 0, tag=1), 5)
        res["again_send"] = _bounded(lambda: dist.send(torch.ones(4), 0, tag=2), 5)
    else:
        time.sleep(LATE_S + 0.5)
        res["send_2"] = _bounded(lambda: dist.send(torch.ones(4), 0, tag=3), 5)
    with open(out % rank, "w") as f:
        json.dump(res, f)
    os._exit(0)  # a closed pair can hang destroy_process_group; the result is written
