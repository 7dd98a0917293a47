"""Conservation and progress as verdicts (engine/conservation.py): a request held nowhere ends
the run `lost` at the pass it went missing, and passes with requests outstanding and no token
committed end it `stalled`; neither waits for a budget to end it as `timeout`.

Red arms are the two bug shapes that ended `timeout` before (tests/mutants_lost.py): a void's
requeue that forgets one request, and a cutover that forgets the last slot's residents --
on the simulator (in-process) and on real gloo ranks (a sitecustomize plant).
"""

from __future__ import annotations

import time

import pytest
from mutants_lost import DROP_VOIDED_SRC, FORGET_RESIDENTS_SRC, PAUSE_FOREVER_SRC, plant
from ppx_helpers import SHORT_SKEW, on_gloo

from ppx.core import stop_verdict
from ppx.engine.conservation import Conservation

# rank 1's small pool makes rank 0's told prefixes unhonourable: retractions and voids
VOIDS = [
    "pp=2",
    "engine/admission=decision",
    "engine/ordering=decision_first",
    "engine/guard=rid",
    *SHORT_SKEW,
]
VOIDS_SIM = [*VOIDS, "engine.transport=sim", "model=hash"]
# decode residents in every slot when a flip cuts over
FLIPS = [
    "pp=3",
    "workload.num_requests=12",
    "workload.concurrency=6",
    "workload.max_new=24",
    "flip=every_40_passes",
    "flip.every_passes=12",
    "flip.inflight=drain",
]
FLIPS_SIM = [*FLIPS, "engine.transport=sim", "model=hash"]
IDS = ["drop_voided", "forget_residents"]


class Held:
    def __init__(self, places: dict[int, str]) -> None:
        self.p = places
        self.waiting: list = []  # the queue-order check reads it: nothing waits here

    def places(self) -> dict[int, str]:
        return self.p


def test_a_request_held_nowhere_is_lost_naming_where_it_was_last_seen():
    c = Conservation(rank=0, stall_passes=0)
    c.took(7, "the queue it entered")
    assert c.check(Held({7: "the waiting queue"}), 3) is None
    assert c.check(Held({7: "slot 1"}), 4) is None
    why = c.check(Held({}), 5)
    assert why is not None and why.startswith(
        "lost: rid 7 left slot 1 at pass 4 and is held nowhere"
    )
    assert stop_verdict(why) == "lost"
    c.left(7)  # its last token applied: held nowhere is right
    assert c.check(Held({}), 6) is None


def test_outstanding_requests_with_no_token_for_the_bound_are_stalled_and_a_token_resets_it():
    c = Conservation(rank=0, stall_passes=10)
    c.took(1, "the queue it entered")
    held = Held({1: "the waiting queue"})
    assert all(c.check(held, p) is None for p in range(1, 11))
    c.committed()
    assert c.check(held, 11) is None  # a token at pass 11: the count starts again
    assert all(c.check(held, p) is None for p in range(12, 22))
    why = c.check(held, 22)
    assert why is not None and why.startswith("stalled: 1 requests outstanding [1], no token")
    assert stop_verdict(why) == "stalled"
    follower = Conservation(rank=1, stall_passes=10)  # rank 0 alone judges progress
    follower.took(1, "the chain")
    assert all(follower.check(held, p) is None for p in range(1, 40))


@pytest.mark.parametrize(
    "src,base", [(DROP_VOIDED_SRC, VOIDS_SIM), (FORGET_RESIDENTS_SRC, FLIPS_SIM)], ids=IDS
)
def test_sim_green_arms_serve_without_the_plant(engine, src, base):
    s, _ = engine(*base)
    assert s["verdict"] == "served" and s["lost"] == 0, s
    assert (s["voids"] if src is DROP_VOIDED_SRC else s["flips"]) > 0, s  # the path ran


@pytest.mark.parametrize(
    "src,base,left",
    [(DROP_VOIDED_SRC, VOIDS_SIM, "the pass in flight on slot \\d"),
     (FORGET_RESIDENTS_SRC, FLIPS_SIM, "slot \\d")],
    ids=IDS,
)  # fmt: skip
def test_sim_red_arms_end_lost_by_name_within_a_virtual_second(
    engine, monkeypatch, src, base, left
):
    import re

    from ppx.engine.flip import FlipControl
    from ppx.engine.scheduler import Scheduler

    for cls, name in ((Scheduler, "void"), (FlipControl, "cutover")):
        monkeypatch.setattr(cls, name, getattr(cls, name))  # undone after the test
    plant(src)
    s, _ = engine(*base)
    assert s["verdict"] == "lost", s
    assert re.match(rf"lost: rid \d+ left ({left})", s["reason"]), s["reason"]
    assert s["sim"]["virtual_s"] < 1.0, s["sim"]


@pytest.mark.parametrize(
    "src,base", [(DROP_VOIDED_SRC, VOIDS), (FORGET_RESIDENTS_SRC, FLIPS)], ids=IDS
)
def test_gloo_red_arms_end_lost_on_real_ranks(engine, plant, src, base):
    plant(src)
    t0 = time.time()
    s, _ = engine(*on_gloo(base), "engine.start_method=spawn", "model=hash", "watch.max_run_s=60")
    assert s["verdict"] == "lost" and s["reason"].startswith("lost: rid "), s
    assert time.time() - t0 < 60


SMALL_SIM = ["pp=3", "engine.transport=sim", "model=hash", "workload.num_requests=4"]


@pytest.mark.parametrize("bound", ["passes", "virtual_time"])
def test_sim_a_pause_never_lifted_is_stalled_by_passes_or_by_virtual_time(
    engine, monkeypatch, bound
):
    from ppx.engine.scheduler import Scheduler

    monkeypatch.setattr(Scheduler, "add", Scheduler.add)
    plant(PAUSE_FOREVER_SRC)
    extra = (
        ["engine.liveness.stall_passes=0", "watch.progress_stall_s=2"]
        if bound == "virtual_time"
        else []
    )
    s, _ = engine(*SMALL_SIM, *extra)
    assert s["verdict"] == "stalled", s
    if bound == "passes":
        assert s["reason"].startswith("stalled: 4 requests outstanding [0, 1, 2, 3], no token"), s
    else:
        assert "virtual s (watch.progress_stall_s=2.0); runnable: " in s["reason"], s
    # 2000 passes at pp=3 are ~6.5 virtual s (1 ms a step); the watch's own bound is 2 s, looked at every 1024 steps
    assert s["sim"]["virtual_s"] < (10.0 if bound == "passes" else 4.0), s["sim"]


def test_gloo_a_pause_never_lifted_is_stalled(engine, plant):
    plant(PAUSE_FOREVER_SRC)
    s, _ = engine(
        "pp=2", "model=hash", "workload.num_requests=4", "engine.transport=gloo",
        "engine.start_method=spawn", "watch.max_run_s=60",
    )  # fmt: skip
    assert s["verdict"] == "stalled" and s["reason"].startswith("stalled: 4 requests"), s
