"""Which rank pairs carry payloads over NCCL, and the one order every rank opens them in.

Shared by the NCCL transport (what it creates at start-up) and the simulator's NCCL model
(which pairs it connects eagerly, and what it refuses), so the two cannot drift apart.

Payloads travel stage to stage (chain, proxy, decision, the output relay: r -> r + 1) and on
the wraparound (the output tokens: last -> 0); nothing else carries a tensor. Three layouts
(`sim.communicators`; docs/protocols.md "On NCCL" for what each does under NCCL's rules):
- `forward`: one communicator per neighbour pair, carrying r -> r + 1 only; the wraparound's
  payload (a few int64 token ids) goes over gloo with its header. pp - 1 communicators. No
  pair ever sends both ways on NCCL, so no two ranks can both wait in a send to each other.
- `pair`: the neighbours plus (0, pp - 1), each both ways: pp communicators (pp > 2).
- `kind`: one per (kind, pair), 7 x C(pp, 2) (196 at pp=8): ppx's transport before issue #24.
"""

from __future__ import annotations

Pair = tuple[int, int]


def payload_pairs(world: int) -> list[Pair]:
    """Every (low, high) pair that exchanges payloads, in the global start-up order.

    The order is the lexicographic one every rank walks: the smallest pair not yet opened
    always has both its ranks free to reach it (everything before it is done), so a walk in
    which opening a pair blocks until both ranks are at it cannot deadlock -- unlike per-rank
    orders such as "my next neighbour first", where rank a waits for b on (a, b) while b
    waits for c on (b, c) and c for a on (c, a)."""
    pairs = {(r, r + 1) for r in range(world - 1)}
    if world > 1:
        pairs.add((0, world - 1))
    return sorted(pairs)


def forward_pairs(world: int) -> list[Pair]:
    """The neighbour pairs, in the global start-up order (a sub-list of payload_pairs)."""
    return [(r, r + 1) for r in range(world - 1)]


def on_nccl(forward_only: bool, src: int, dst: int) -> bool:
    """Whether a payload from `src` to `dst` travels over NCCL (else gloo): every payload,
    or under a forward-only layout the forward ones."""
    return dst == src + 1 if forward_only else True


def pair_of(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def no_pair_error(rank: int, peer: int, world: int) -> str:
    return (
        f"nccl: rank{rank} has no communicator with rank{peer}: payloads travel only between "
        f"neighbours and last -> first ({payload_pairs(world)})"
    )
