"""The knobs of the simulated NCCL plane (`sim.*`, sim.semantics=nccl) and what they decide
before any operation runs: which communicator an operation uses, which ranks must create it,
and the order a rank sets its communicators up in. The plane (sim_nccl.py) applies them.

Communicators and streams. In ProcessGroupNCCL a communicator and its stream share one key, so
one key is one FIFO of matching (NCCL has no tags) and one stream (issue order):
- plain `isend`/`irecv` (`p2p_api=send`) use the 2-rank communicator keyed `{low}:{high}`: a
  send to rank 1 shares a stream with a receive from rank 1 and runs beside a send to rank 2
  (pytorch#132852); it is created by the pair's first call (pytorch#129140, #152220);
- `batch_isend_irecv` (`p2p_api=batch`) uses the group's device-keyed communicator, one stream
  for every peer; created lazily, its first call needs every rank of the group (pytorch#74701,
  #160342).
ppx's own layouts (`forward`, `pair`, `kind`) open a 2-rank group per pair (per kind too, for
`kind`), where both APIs name the same two ranks; `world` puts every payload on the one
default group, where they differ.

Set-up order (`connect=lazy`): `first_use` creates a communicator inside its first payload
operation (the host blocks there until the peer's first call, pytorch#108378); `global` and
`next_first` create every communicator at start-up, each rank walking its own list and
blocking at each until the peer reaches it: in the one global order (pairs.payload_pairs,
what ppx's transport does) no walk can wait in a circle; `next_first` (each rank its next
neighbour first) differs rank to rank and waits in a circle on a ring of communicators.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ppx.core import Kind
from ppx.engine.transport.pairs import Pair, forward_pairs, no_pair_error, pair_of, payload_pairs

WORLD = ("world",)  # the default group's device-keyed communicator (p2p_api=batch on `world`)
SETUP_ORDERS = ("first_use", "global", "next_first")


@dataclass(frozen=True)
class NcclRules:
    send_buffer_bytes: int = 1 << 20
    connect: str = "eager"
    connect_order: str = "first_use"
    stream_order: bool = True
    independent_progress: bool = False
    grouped: bool = True
    communicators: str = "forward"
    p2p_api: str = "send"
    host_sync: str = "none"

    @classmethod
    def of(cls, sim) -> NcclRules:
        """From the `sim` config section (SimCfg or its DictConfig); a key it lacks keeps
        its default."""
        default = cls()  # every field has a default: its type casts what the config holds
        got = {f.name: getattr(sim, f.name, getattr(default, f.name)) for f in fields(cls)}
        return cls(**{name: type(getattr(default, name))(v) for name, v in got.items()})

    def pairs(self, world: int) -> list[Pair]:
        """The pairs payloads travel between, in the global start-up order."""
        return forward_pairs(world) if self.communicators == "forward" else payload_pairs(world)

    def comm_of(self, world: int, rank: int, peer: int, tag: int) -> tuple:
        """The communicator (= the stream) an operation between `rank` and `peer` uses."""
        pair = pair_of(rank, peer)
        if self.communicators == "kind":
            return (pair, tag)
        if pair not in self.pairs(world):
            raise RuntimeError(no_pair_error(rank, peer, world))
        if self.communicators == "world" and self.p2p_api == "batch":
            return WORLD
        return (pair,)

    def members(self, world: int, comm: tuple) -> frozenset[int]:
        """The ranks that must all reach a communicator's creation before it is usable."""
        return frozenset(range(world)) if comm == WORLD else frozenset(comm[0])

    def setup_walk(self, world: int, rank: int) -> list[tuple]:
        """The communicators `rank` creates at start-up, in the order it creates them
        (empty unless connect=lazy with a start-up order)."""
        if self.connect != "lazy" or self.connect_order == "first_use":
            return []
        mine = [p for p in self.pairs(world) if rank in p]
        if self.connect_order == "next_first":
            # the pair with this rank's next neighbour first: rank r waits for r + 1 first
            mine.sort(key=lambda p: (p[0] + p[1] - rank - rank - 1) % world)
        tags = [1 + int(k) for k in Kind] if self.communicators == "kind" else [1]
        walk = []
        for p in mine:
            for tag in tags:
                comm = self.comm_of(world, rank, p[0] if p[1] == rank else p[1], tag)
                if comm not in walk:
                    walk.append(comm)
        return walk
