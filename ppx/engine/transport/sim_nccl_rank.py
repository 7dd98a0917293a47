"""One rank's side of the simulated NCCL plane (sim_nccl.py): the host calls a SimTransport
makes for payload tags under sim.semantics=nccl. An isend returns once issued (an NCCL
`work.wait()` only orders streams); a recv returns once its data arrived, as ppx's NCCL
transport waits for it on the host; a lazy pair's first call waits for the peer's."""

from __future__ import annotations

import contextlib

import torch

from ppx.engine.transport.sim_nccl import NcclOp, NcclPlane


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

    def __init__(self, plane: NcclPlane, sched, rank: int) -> None:
        self.plane, self.sched, self.rank = plane, sched, rank
        self.group_id: int | None = None

    def _op(self, peer: int, send: bool, tag: int, tensor: torch.Tensor) -> NcclOp:
        p = self.plane
        comm = p.comm_of(self.rank, peer, tag)
        if not p.touch(self.rank, comm):  # lazy: the pair's communicator is created here
            self.sched.wait_until(
                lambda: comm in p.connected,
                f"nccl connect rank{self.rank}<->rank{peer} (lazy: the pair's first call "
                f"waits for rank{peer}'s)",
            )
        op = p.issue(self.rank, peer, send, tag, tensor, comm, self.group_id)
        if op.error:
            raise RuntimeError(op.error)
        return op

    def connect(self, peer: int, tag: int = 1) -> None:
        """A blocking creation of the communicator with `peer` (ProcessGroupNCCL's eager
        `new_group(device_id=...)`): returns once `peer` made its own call on the pair."""
        p = self.plane
        comm = p.comm_of(self.rank, peer, tag)
        p.join(self.rank, comm)
        self.sched.wait_until(
            lambda: comm in p.connected, f"nccl connect rank{self.rank}<->rank{peer}"
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
