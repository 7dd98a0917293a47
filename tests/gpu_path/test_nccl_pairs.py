"""The NCCL transport's start-up, on the CPU: what it creates, in which order, and whether that
order and those pairs survive NCCL's rules as the simulator models them (sim.semantics=nccl).

`torch.distributed` is replaced by a recorder, so each rank's constructor runs for real and
leaves a transcript (new_group, warm-up send / recv). The transcripts are then replayed as
simulated ranks under the strictest rules (lazy connection, synchronous sends); the pairs are
checked against every payload the engine puts on NCCL in simulated runs.
"""

from __future__ import annotations

import datetime
import os
from types import SimpleNamespace

import pytest
import torch

import ppx.engine.transport.nccl as nccl
from ppx.engine.transport.gloo import GlooTransport
from ppx.engine.transport.pairs import forward_pairs, payload_pairs
from ppx.engine.transport.sim import SimTransport, SimWire
from ppx.sim.scheduler import Scheduler
from ppx.sim.strategy import RandomStrategy

OLD_COUNT = "7 kinds x C({pp}, 2) = {n}"  # one communicator per (kind, pair) before issue #24
ENV = tuple(nccl.nccl_environment(1))


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def new_group(self, ranks, timeout=None, backend=None, device_id=None):
        self.calls.append(("new_group", tuple(ranks), backend, timeout, device_id))
        return ("group", tuple(ranks))

    def send(self, tensor, dst, group=None):
        self.calls.append(("send", dst, group))

    def recv(self, tensor, src, group=None):
        self.calls.append(("recv", src, group))


@pytest.fixture
def fake_gpu(monkeypatch):
    """NcclTransport's constructor on the CPU: gloo's init and the CUDA calls are no-ops,
    torch.distributed is a recorder (one per rank), the env it sets is restored after."""

    def gloo_init(self, rank, world, port, host="127.0.0.1", store=None):
        self.rank, self.world = rank, world

    monkeypatch.setattr(GlooTransport, "__init__", gloo_init)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(nccl.NcclTransport, "_token", lambda self: torch.zeros(1))
    for k in ENV:
        monkeypatch.delenv(k, raising=False)

    def start(world: int, timeout_s: int = 600) -> dict[int, tuple[nccl.NcclTransport, list]]:
        out = {}
        for r in range(world):
            rec = Recorder()
            monkeypatch.setattr(nccl, "dist", rec)
            out[r] = (nccl.NcclTransport(r, world, 0, timeout_s=timeout_s), rec.calls)
        return out

    return start


def transcript(calls: list[tuple], rank: int) -> list[tuple[str, int]]:
    """What blocks on a peer, in call order: creating a pair's communicator (eager, a call
    both members must make) and the warm-up exchange."""
    ops = []
    for c in calls:
        if c[0] == "new_group" and rank in c[1]:
            ops.append(("connect", c[1][1] if c[1][0] == rank else c[1][0]))
        elif c[0] in ("send", "recv"):
            ops.append((c[0], c[1]))
    return ops


STRICT = SimpleNamespace(
    semantics="nccl",
    send_buffer_bytes=0,
    connect="lazy",
    stream_order=True,
    independent_progress=False,
    grouped=True,
    communicators="forward",
)


def replay(per_rank: dict[int, list[tuple[str, int]]], layout: str = "forward") -> str:
    """Each rank's transcript as a simulated rank under NCCL's rules; 'done' or 'deadlock'."""
    world = len(per_rank)
    sched = Scheduler(RandomStrategy(0), 1e-3, 100_000, 1e6)
    wire = SimWire(sched, world, SimpleNamespace(**(vars(STRICT) | {"communicators": layout})))
    ts = [SimTransport(wire, r) for r in range(world)]

    def body(r: int):
        def go():
            for op, peer in per_rank[r]:
                if op == "connect":
                    ts[r].nccl.connect(peer)
                elif op == "send":
                    ts[r].isend(peer, 1, torch.zeros(1))
                else:
                    ts[r].recv(peer, 1, torch.zeros(1))

        return go

    for r in range(world):
        sched.spawn(f"rank{r}", body(r))
    end = sched.run()
    sched.close()
    return end


@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_the_start_up_order_completes_under_nccl_rules(fake_gpu, world):
    ranks = fake_gpu(world)
    per_rank = {r: transcript(calls, r) for r, (_, calls) in ranks.items()}
    assert replay(per_rank) == "done"
    for r, (t, calls) in ranks.items():
        groups = [c[1] for c in calls if c[0] == "new_group"]
        assert groups == forward_pairs(world)  # every rank, every pair, one global order
        assert sorted(t.groups) == [p for p in forward_pairs(world) if r in p]
        assert all(c[2] == "nccl" and c[4] == torch.device(f"cuda:{r}") for c in calls[:1])


def test_a_per_rank_order_deadlocks_where_the_global_order_completes():
    """Red arm: on a ring of pairs (0,1), (1,2), (0,2) each rank creating the pair with its
    next neighbour first waits in a cycle 0 -> 1 -> 2 -> 0; the global order completes."""
    ring = payload_pairs(3)

    def mine(r: int) -> list:
        return [("connect", b if a == r else a) for a, b in ring if r in (a, b)]

    def nearest_first(r: int) -> list:
        return sorted(mine(r), key=lambda op: (op[1] - r) % 3)

    assert replay({r: nearest_first(r) for r in range(3)}, "pair") == "deadlock"
    assert replay({r: mine(r) for r in range(3)}, "pair") == "done"


def test_communicators_are_linear_in_pp(fake_gpu, capsys):
    counts = {}
    for pp in range(2, 9):
        calls = fake_gpu(pp)[0][1]
        counts[pp] = len([c for c in calls if c[0] == "new_group"])
    assert counts == {pp: pp - 1 for pp in range(2, 9)}
    with capsys.disabled():
        old = OLD_COUNT.format(pp=8, n=7 * 8 * 7 // 2)
        print(f"\nNCCL communicators at pp=8: {counts[8]} (before issue #24: {old})")


def test_the_watchdog_cannot_end_a_wedge_before_ppx_does(fake_gpu):
    cfg = SimpleNamespace(
        watch=SimpleNamespace(max_run_s=180.0, stall_s=4.0, shutdown_grace_s=15.0)
    )
    timeout = nccl.watchdog_timeout_s(cfg)
    calls = fake_gpu(2, timeout)[0][1]
    assert timeout > 180 + 4 + 15
    assert all(c[3] == datetime.timedelta(seconds=timeout) for c in calls if c[0] == "new_group")
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "0"
    assert os.environ["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == str(timeout)


def test_an_exported_watchdog_setting_wins(fake_gpu, monkeypatch):
    monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")
    fake_gpu(2)
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"


@pytest.mark.parametrize("ordering", ["decision_first", "upstream"])
def test_every_payload_the_engine_puts_on_nccl_has_a_communicator(fake_gpu, monkeypatch, ordering):
    """Pairing: the simulated engine (pp=4) under the transport's layout puts payloads on NCCL
    only between the pairs the transport created, r -> r + 1, and uses every one of them."""
    from ppx_helpers import compose

    from ppx.engine.transport.sim_nccl import NcclPlane
    from ppx.sim.world import SimSupervisor

    ranks = fake_gpu(4)
    created = {p for t, _ in ranks.values() for p in t.groups}
    admission = "rank_local" if ordering == "upstream" else "decision"
    cfg = compose(
        "+exp=micro_load",
        "pp=4",
        "logger=none",
        f"engine/ordering={ordering}",
        f"engine/admission={admission}",
        "sim.semantics=nccl",
    )
    seen = set()
    issue = NcclPlane.issue

    def spy(self, rank, peer, send, *rest):
        seen.add((rank, peer) if send else (peer, rank))
        return issue(self, rank, peer, send, *rest)

    monkeypatch.setattr(NcclPlane, "issue", spy)
    assert SimSupervisor(cfg, None).run()["verdict"] == "served"
    assert all(dst == src + 1 for src, dst in seen)
    assert {tuple(sorted(p)) for p in seen} == created
