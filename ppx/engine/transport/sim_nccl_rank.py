"""One rank's side of the simulated NCCL plane (sim_nccl.py): the host calls a SimTransport
makes for payload tags under sim.semantics=nccl. An isend returns once issued (an NCCL
`work.wait()` only orders streams); a recv returns once its data arrived, as ppx's NCCL
transport waits for it on the host; under connect=lazy a communicator's creation waits for
its other members (in the first call, or in the start-up walk); `host_sync=device` makes a
compute step wait for every NCCL operation of the rank (torch.cuda.synchronize).

A wait on another rank that no channel operation announced (a creation inside an isend or at
start-up, a host sync inside compute) writes its own blocked-on record naming that rank, so
the wait-for graph and cycle.txt name it; the record it interrupted is put back after."""

from __future__ import annotations

import contextlib

import torch

from ppx.engine.board import F, Op, RankBoard
from ppx.engine.transport.sim_nccl import NcclOp, NcclPlane

_BLK = slice(int(F.BLK_OP), int(F.BLK_WIDTH) + 1)  # the blocked-on record's fields


class _Sent:
    """An NCCL isend's handle: wait() only orders streams, it never waits for the peer."""

    def __init__(self, op: NcclOp) -> None:
        self.op = op

    def wait(self) -> None:
        if self.op.error:
            raise RuntimeError(self.op.error)


class _Received:
    def __init__(self, ep: NcclEndpoint, op: NcclOp) -> None:
        self.ep, self.op = ep, op

    def wait(self) -> None:
        self.ep.finish(self.op)


class NcclEndpoint:
    """One rank's side of the plane: the host calls a SimTransport makes for tags >= 1."""

    def __init__(self, plane: NcclPlane, sched, rank: int, board=None) -> None:
        """`board`: the run's status board, where the waits below write their record (None
        in transport-level tests: the scheduler's label is then the only record)."""
        self.plane, self.sched, self.rank = plane, sched, rank
        self.board = RankBoard(board, rank) if board is not None else None
        self.group_id: int | None = None

    # -- waits on other ranks that no channel operation announced ---------------------------
    def _wait(self, pred, label: str, op: Op, peer: int, kind: int) -> None:
        if pred():
            return
        rb = self.board
        if rb is None:
            self.sched.wait_until(pred, label)
            return
        # the channel's own record (a recv of the payload, compute) is put back after; a
        # wait that never ends leaves this one behind, as a channel's does
        saved = rb.f[_BLK].copy()
        rb.block(op, peer, kind, -1, int(rb.f[F.PASS]), -1)
        self.sched.wait_until(pred, label)
        rb.f[_BLK] = saved

    def _connect(self, comm: tuple, why: str, kind: int) -> None:
        p = self.plane
        p.join(self.rank, comm)
        while comm not in p.connected:  # one member at a time: the record names who is missing
            peer = p.missing(comm)
            self._wait(
                lambda peer=peer: peer in p.touched[comm],
                f"nccl connect rank{self.rank}<->rank{peer} ({why}: waits for rank{peer}'s)",
                Op.CONNECT,
                peer,
                kind,
            )

    def start(self) -> None:
        """connect=lazy with a start-up order: create this rank's communicators one by one,
        each blocking until its other members reach it (ppx's transport walks its pairs so)."""
        for comm in self.plane.rules.setup_walk(self.plane.world, self.rank):
            self._connect(comm, f"start-up, {self.plane.rules.connect_order} order", 0)

    def _op(self, peer: int, send: bool, tag: int, tensor: torch.Tensor) -> NcclOp:
        p = self.plane
        comm = p.comm_of(self.rank, peer, tag)
        if not p.touch(self.rank, comm):  # lazy: the communicator is created in this call
            self._connect(comm, "lazy: its first call", tag - 1)
        op = p.issue(self.rank, peer, send, tag, tensor, comm, self.group_id)
        if op.error:
            raise RuntimeError(op.error)
        return op

    def connect(self, peer: int, tag: int = 1) -> None:
        """A blocking creation of the communicator with `peer` (ProcessGroupNCCL's eager
        `new_group(device_id=...)`): returns once `peer` made its own call on the pair."""
        self._connect(self.plane.comm_of(self.rank, peer, tag), "blocking creation", 0)

    def host_sync(self) -> None:
        """A compute step that syncs the host with the device (`torch.cuda.synchronize()`,
        or `.cpu()` on a stream a send's work.wait() was tied to): under host_sync=device it
        returns once every NCCL operation this rank issued is done -- a send still spinning
        for its receive holds the host, whatever the host was about to send."""
        if not self.plane.rules.device_sync:
            return
        mine = [o for o in self.plane.pending if o.rank == self.rank and not o.done]
        for o in mine:
            self._wait(
                lambda o=o: o.done,
                f"host sync (compute) behind nccl {'send to' if o.send else 'recv from'} "
                f"rank{o.peer} tag {o.tag}",
                Op.COMPUTE,
                o.peer,
                o.tag - 1,
            )

    def isend(self, dst: int, tag: int, tensor: torch.Tensor) -> _Sent:
        op = self._op(dst, True, tag, tensor)
        self.sched.point(f"nccl isend to rank{dst} tag {tag}")
        return _Sent(op)

    def irecv(self, src: int, tag: int, out: torch.Tensor) -> _Received:
        return _Received(self, self._op(src, False, tag, out))

    def recv(self, src: int, tag: int, out: torch.Tensor) -> torch.Tensor:
        if self.group_id is not None:
            raise RuntimeError("nccl: a blocking recv inside group() never starts; use irecv")
        self.finish(self._op(src, False, tag, out))
        return out

    def finish(self, op: NcclOp) -> None:
        """The host waits for the receive's data (ppx's NCCL transport does)."""
        held = self.plane.holder(op)
        behind = (
            f", behind its {'send to' if held.send else 'recv from'} rank{held.peer}"
            if held
            else ""
        )
        self.sched.wait_until(
            lambda: op.done,
            f"nccl recv from rank{op.peer} tag {op.tag} (comm {op.comm[0]}{behind})",
        )
        if op.error:
            raise RuntimeError(op.error)

    @contextlib.contextmanager
    def group(self):
        """ncclGroupStart/End: the operations issued inside run as one (rules.grouped)."""
        if not self.plane.rules.grouped:
            yield
            return
        self.group_id = self.plane.open_group()
        try:
            yield
        finally:
            gid, self.group_id = self.group_id, None
            self.plane.close_group(gid)
