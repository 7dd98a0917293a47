"""NCCL's point-to-point rules, modelled for the simulator's payload plane (sim.semantics=nccl).

On a GPU, ppx's headers (tag 0) and collectives go over gloo and the payloads over NCCL; under
`sim.semantics=nccl` the simulated wire does the same: tag 0 keeps sim.py's gloo model, tags
1 + kind follow the rules below, each a `sim.*` knob (SimCfg, read into sim_nccl_rules.NcclRules,
which also decides the communicator of an operation and the start-up set-up walk) so a study
can switch it off. Sources are listed in docs/simulation.md ("NCCL semantics").

- `send_buffer_bytes`: a send completes into its connection's buffer while the bytes its
  direction left unreceived fit; past that (or always, at 0) it waits for the matching
  receive (NVIDIA/nccl#544: two 512 KB sends fit; #783: a send may block until the recv).
- `connect`: `lazy` -- a communicator is usable once every member reached its creation (in the
  first operation, or in the start-up walk of `connect_order`); `eager` -- at start-up.
- `stream_order`: a rank's operations on one communicator (= one stream) run in issue order,
  so a send that waits for its receive holds every later operation there (NVIDIA/nccl#479).
- `independent_progress`: false models what CUDA promises for two communicators, nothing: every
  NCCL operation of a rank runs in issue order, whatever its communicator (NVIDIA/nccl#783,
  #195, #1766); true lets each communicator progress on its own.
- `grouped`: the sends and receives of one `group()` run as one operation; a send/receive pair
  grouped on one side only is undefined and ends the run (NVIDIA/nccl#479, #1279).
  Inside a group the calls to one peer in one direction still run in order (NCCL's p2p
  docs): the k-th send meets the k-th receive, and a send buffers only behind its
  direction's earlier sends (`_try`), so no knob could change it.
- no tags: a communicator matches sends and receives by issue order only (pytorch#94819), so
  a receive that meets another kind's payload ends the run instead of reading it.
- `communicators` / `p2p_api`: the layout and the torch API (sim_nccl_rules).
Host side: an isend returns once issued (an NCCL `work.wait()` only orders streams); a recv
returns once its data arrived (ppx's NCCL transport waits for it on the host); `host_sync`
(sim_nccl_rank) is a compute step that waits for the device.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import torch

from ppx.engine.transport.pairs import on_nccl
from ppx.engine.transport.sim_nccl_rules import NcclRules


@dataclass(eq=False)
class NcclOp:
    seq: int
    rank: int
    peer: int
    send: bool
    comm: tuple
    tag: int
    tensor: torch.Tensor
    group: int | None
    index: int = -1  # its place in the FIFO of its (communicator, direction)
    done: bool = False
    buffered: bool = False  # a send that completed into the connection buffer
    error: str | None = None

    @property
    def nbytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()

    @property
    def key(self) -> tuple:
        src, dst = (self.rank, self.peer) if self.send else (self.peer, self.rank)
        return (self.comm, src, dst)


class NcclPlane:
    """Every rank's NCCL operations of one simulated run, completed as soon as the rules allow.
    `progress()` runs after every issue: completion depends only on what was issued, so the
    result is the same whenever it is computed (replays stay exact)."""

    def __init__(self, world: int, rules: NcclRules) -> None:
        self.world, self.rules = world, rules
        self.seq = 0
        self.pending: list[NcclOp] = []  # not yet done, in issue order
        self.fifo: dict[tuple, dict[bool, list[NcclOp]]] = defaultdict(
            lambda: {True: [], False: []}
        )
        self.inflight: dict[tuple, int] = defaultdict(int)  # buffered bytes per direction
        self.touched: dict[tuple, set[int]] = defaultdict(set)
        self.connected: set[tuple] = set()
        self.groups: dict[int, list[NcclOp]] = {}
        self.open_groups: set[int] = set()

    def carries(self, src: int, dst: int) -> bool:
        """Whether this payload goes over NCCL (else over the simulated gloo wire)."""
        return on_nccl(self.rules.layout.forward_only, src, dst)

    def comm_of(self, rank: int, peer: int, tag: int) -> tuple:
        return self.rules.comm_of(self.world, rank, peer, tag)

    def join(self, rank: int, comm: tuple) -> bool:
        """`rank` reached the creation of `comm`; True once every member has."""
        self.touched[comm].add(rank)
        if self.touched[comm] >= self.rules.members(self.world, comm):
            self.connected.add(comm)
        return comm in self.connected

    def missing(self, comm: tuple) -> int:
        """The lowest member of `comm` that has not reached its creation yet (-1: none)."""
        left = self.rules.members(self.world, comm) - self.touched[comm]
        return min(left) if left else -1

    def touch(self, rank: int, comm: tuple) -> bool:
        """A rank's operation on `comm`; True once the communicator is usable."""
        return not self.rules.lazy or self.join(rank, comm)

    def issue(self, rank, peer, send, tag, tensor, comm, group) -> NcclOp:
        op = NcclOp(self.seq, rank, peer, send, comm, tag, tensor, group)
        self.seq += 1
        q = self.fifo[op.key][send]
        op.index = len(q)
        q.append(op)
        self.pending.append(op)
        if group is not None:
            self.groups[group].append(op)
        self.progress()
        return op

    def open_group(self) -> int:
        gid = len(self.groups)
        self.groups[gid] = []
        self.open_groups.add(gid)
        return gid

    def close_group(self, gid: int) -> None:
        self.open_groups.discard(gid)
        self.progress()

    # -- the rules --------------------------------------------------------------------------
    def started(self, op: NcclOp) -> bool:
        """At the head of its queue (every earlier operation it is ordered after is done) and
        not in a group still open (NCCL issues a group at ncclGroupEnd)."""
        return op.group not in self.open_groups and self.holder(op) is None

    def holder(self, op: NcclOp) -> NcclOp | None:
        """The earlier operation `op` waits behind in its queue, if any."""
        r = self.rules
        for o in self.pending:
            if o is op:
                return None
            if o.done or o.rank != op.rank:
                continue
            if op.group is not None and o.group == op.group:
                # a group's calls progress independently; those to one peer in one direction
                # still run in order, by the FIFO match and the buffer rule (_try)
                continue
            if not r.stream_order or r.independent_progress and o.comm != op.comm:
                continue
            return o
        return None

    def partner(self, op: NcclOp) -> NcclOp | None:
        q = self.fifo[op.key][not op.send]
        return q[op.index] if op.index < len(q) else None

    def progress(self) -> None:
        moved = True
        while moved:
            moved = False
            for op in self.pending:
                if not op.done and self._try(op):
                    moved = True
            self.pending = [o for o in self.pending if not o.done]

    def _try(self, op: NcclOp) -> bool:
        if not self.started(op) or op.comm not in self.connected and self.rules.lazy:
            return False
        other = self.partner(op)
        if op.send:
            if other is not None and self.started(other):
                return self._match(op, other)
            buf = self.rules.send_buffer_bytes
            earlier = self.fifo[op.key][True][: op.index]
            if (
                buf > 0
                and all(s.done for s in earlier)
                and self.inflight[op.key] + op.nbytes <= buf
            ):
                op.done = op.buffered = True
                self.inflight[op.key] += op.nbytes
                return True
            return False
        if other is None:
            return False
        if other.buffered:
            self.inflight[op.key] -= other.nbytes
            return self._match(other, op)
        return self.started(other) and self._match(other, op)

    def _match(self, s: NcclOp, r: NcclOp) -> bool:
        s.done = r.done = True
        why = self._refuse(s, r)
        if why:
            s.error = r.error = why
            return True
        r.tensor.copy_(s.tensor.reshape(r.tensor.shape))
        return True

    def _refuse(self, s: NcclOp, r: NcclOp) -> str | None:
        if (
            s.tag != r.tag
            or s.tensor.numel() != r.tensor.numel()
            or s.tensor.dtype != r.tensor.dtype
        ):
            return (
                f"nccl: rank{r.rank} receives a tag-{r.tag} payload ({r.tensor.numel()} "
                f"{r.tensor.dtype}) from rank{s.rank}, whose next send on the communicator is "
                f"tag {s.tag} ({s.tensor.numel()} {s.tensor.dtype}): NCCL matches by issue order, "
                "tags are ignored"
            )
        if self._sendrecv(s) != self._sendrecv(r):
            a, b = (s.rank, r.rank) if self._sendrecv(s) else (r.rank, s.rank)
            return (
                f"nccl: rank{a} grouped its send and receive with rank{b}, rank{b} did not: "
                "undefined (NVIDIA/nccl#1279)"
            )
        return None

    def _sendrecv(self, op: NcclOp) -> bool:
        """In a group that both sends to and receives from the op's peer."""
        if op.group is None:
            return False
        dirs = {o.send for o in self.groups[op.group] if o.peer == op.peer}
        return dirs == {True, False}
