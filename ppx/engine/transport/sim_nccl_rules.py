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
from ppx.switch import Switch

WORLD = ("world",)  # the default group's device-keyed communicator (p2p_api=batch on `world`)


@dataclass(frozen=True)
class Semantics:
    nccl: bool  # the NCCL plane's rules below apply (else gloo's rendezvous throughout)


@dataclass(frozen=True)
class Connect:
    lazy: bool  # a communicator exists only once every member reached its creation


@dataclass(frozen=True)
class SetupOrder:
    at_startup: bool  # every communicator created at start-up (else inside its first use)
    next_first: bool = False  # each rank its next neighbour first (else the one global order)


@dataclass(frozen=True)
class Layout:
    forward_only: bool = False  # payload pairs r -> r+1 only (the return path is gloo)
    per_kind: bool = False  # one communicator per pair and message kind (tags kept apart)
    one_world: bool = False  # every payload on the default group (batch: one communicator)


@dataclass(frozen=True)
class P2pApi:
    batch: bool  # batch_isend_irecv (else plain isend/irecv)


@dataclass(frozen=True)
class HostSync:
    device: bool  # a compute step's host sync waits for this rank's NCCL operations


SEMANTICS: Switch[Semantics] = Switch(
    "sim.semantics", {"gloo": Semantics(nccl=False), "nccl": Semantics(nccl=True)}
)
CONNECT: Switch[Connect] = Switch(
    "sim.connect", {"eager": Connect(lazy=False), "lazy": Connect(lazy=True)}
)
CONNECT_ORDER: Switch[SetupOrder] = Switch(
    "sim.connect_order",
    {
        "first_use": SetupOrder(at_startup=False),
        "global": SetupOrder(at_startup=True),
        "next_first": SetupOrder(at_startup=True, next_first=True),
    },
)
COMMUNICATORS: Switch[Layout] = Switch(
    "sim.communicators",
    {
        "forward": Layout(forward_only=True),
        "pair": Layout(),
        "kind": Layout(per_kind=True),
        "world": Layout(one_world=True),
    },
)
P2P_API: Switch[P2pApi] = Switch("sim.p2p_api", {"send": P2pApi(False), "batch": P2pApi(True)})
HOST_SYNC: Switch[HostSync] = Switch(
    "sim.host_sync", {"none": HostSync(device=False), "device": HostSync(device=True)}
)
# the simulated wire's rules (`sim.*`), checked by ppx.validation with every other switch
SIM_SWITCHES = (SEMANTICS, CONNECT, CONNECT_ORDER, COMMUNICATORS, P2P_API, HOST_SYNC)


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

    # the entries the names stand for (the names stay: they are the config's and the record's)
    @property
    def lazy(self) -> bool:
        return CONNECT.get(self.connect).lazy

    @property
    def order(self) -> SetupOrder:
        return CONNECT_ORDER.get(self.connect_order)

    @property
    def layout(self) -> Layout:
        return COMMUNICATORS.get(self.communicators)

    @property
    def device_sync(self) -> bool:
        return HOST_SYNC.get(self.host_sync).device

    def pairs(self, world: int) -> list[Pair]:
        """The pairs payloads travel between, in the global start-up order."""
        return forward_pairs(world) if self.layout.forward_only else payload_pairs(world)

    def comm_of(self, world: int, rank: int, peer: int, tag: int) -> tuple:
        """The communicator (= the stream) an operation between `rank` and `peer` uses."""
        pair = pair_of(rank, peer)
        if self.layout.per_kind:
            return (pair, tag)
        if pair not in self.pairs(world):
            raise RuntimeError(no_pair_error(rank, peer, world))
        if self.layout.one_world and P2P_API.get(self.p2p_api).batch:
            return WORLD
        return (pair,)

    def members(self, world: int, comm: tuple) -> frozenset[int]:
        """The ranks that must all reach a communicator's creation before it is usable."""
        return frozenset(range(world)) if comm == WORLD else frozenset(comm[0])

    def setup_walk(self, world: int, rank: int) -> list[tuple]:
        """The communicators `rank` creates at start-up, in the order it creates them
        (empty unless connect=lazy with a start-up order)."""
        if not (self.lazy and self.order.at_startup):
            return []
        mine = [p for p in self.pairs(world) if rank in p]
        if self.order.next_first:
            # the pair with this rank's next neighbour first: rank r waits for r + 1 first
            mine.sort(key=lambda p: (p[0] + p[1] - rank - rank - 1) % world)
        tags = [1 + int(k) for k in Kind] if self.layout.per_kind else [1]
        walk = []
        for p in mine:
            for tag in tags:
                comm = self.comm_of(world, rank, p[0] if p[1] == rank else p[1], tag)
                if comm not in walk:
                    walk.append(comm)
        return walk
