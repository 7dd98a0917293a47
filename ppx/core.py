"""Data that crosses component boundaries: requests, slot batches, admission entries, messages.

Everything the scheduler, the admission policies, the channels and the model exchange lives
here, with named length properties so no caller re-derives a length by hand.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch


class Kind(enum.IntEnum):
    """Message kinds; each kind has its own payload tag on the wire (1 + kind)."""

    CHAIN = 1  # new requests + control, forwarded rank to rank every pass
    PROXY = 2  # hidden states of a slot's batch, stage to stage
    OUTPUT = 3  # sampled token ids, last rank -> rank 0, relayed
    DECISION = 4  # rank 0's admission entries
    LAP = 5  # followers' observations back to rank 0
    TP = 6  # TP-phase batch broadcast / all-reduce bookkeeping

    @property
    def label(self) -> str:
        return self.name.lower()


class StopRun(Exception):
    """A detected divergence (or an exhausted readiness budget) the policy does not handle:
    the run ends `stopped` with this reason (see `stop_verdict` for the named exceptions)."""


CHANNEL_MISMATCH = "channel mismatch: "

# What a follower reports as its `local` when it is not a coverage it measured (obs rows on
# the wire carry them; the guard learns no floor from any of them):
UNRESOLVED = -1  # the follower could not measure its coverage (e.g. a prefetch pending)
POOL_SHORT = -2  # it holds the prefix but its pool cannot hold the rest: capacity
SEATS_SHORT = -3  # follower_seats=veto: its own seat count said full (not the allocator)


def stop_verdict(reason: str) -> str:
    """The verdict of a rank's stop, by its reason: a livelock bound, a channel whose two ends
    disagree on a message's seq (`mismatch`, like the watchdog's), else `stopped`."""
    if reason.startswith("livelock"):
        return "livelocked"
    if reason.startswith(("lost: ", "stalled: ")):  # engine/conservation.py
        return reason.split(":", 1)[0]
    return "mismatch" if reason.startswith(CHANNEL_MISMATCH) else "stopped"


class Flag(enum.IntFlag):
    NONE = 0
    VOID = 1  # the pass ran nowhere; keeps the output ring matched
    SHUTDOWN = 2  # chain: every rank leaves the loop after this pass
    FLIP = 4  # chain: a phase flip starts at this pass
    RETRACT = 8  # chain: rank 0 retracted rid aux[0] rank-locally (faults.retract.rid)
    HAS_ENTRIES = 16


@dataclass
class Req:
    """One request as every rank sees it. Tokens live here; KV slot ids live in the cache."""

    rid: int
    prompt: list[int]
    max_new: int
    output: list[int] = field(default_factory=list)
    computed: int = 0  # tokens of `tokens` whose KV this rank has computed (or scheduled)
    cached: int = 0  # tokens reused from the radix tree at admission
    slot: int = -1  # the slot the request is pinned to once its final chunk ran
    row: int = -1  # its row in req_to_token, -1 when it holds none
    node: object | None = None  # radix node locked on its behalf
    reserved: int = 0  # KV tokens reserved for the rest of its decode
    admit_seq: int = 0  # bumped at every admission: a stale void must not touch a newer one

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def output_len(self) -> int:
        return len(self.output)

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output

    def token_at(self, i: int) -> int:
        """`tokens[i]` without building the concatenation (a decode step needs one token)."""
        n = len(self.prompt)
        return self.prompt[i] if i < n else self.output[i - n]

    @property
    def seq_len(self) -> int:
        return self.prompt_len + self.output_len

    @property
    def remaining_prefill(self) -> int:
        return self.seq_len - self.computed

    @property
    def finished(self) -> bool:
        return self.output_len >= self.max_new

    @property
    def remaining_new(self) -> int:
        return self.max_new - self.output_len


@dataclass
class Entry:
    """One request's share of a pass: what to compute and where its prefix comes from.

    `prefix_len` is the number of tokens read from the KV pool, `extend_len` the number of
    new tokens computed this pass. Lengths travel between ranks, never slot pointers.
    """

    rid: int
    prefix_len: int
    extend_len: int
    final: bool  # this chunk completes the prefill (the request samples a token)
    continues: bool = False  # the next chunk of a prefill already under way (not an admission)

    @property
    def end(self) -> int:
        return self.prefix_len + self.extend_len


@dataclass
class SlotBatch:
    """The batch one slot runs in one pass on one rank."""

    slot: int
    pass_id: int
    mode: str  # "prefill" or "decode"
    entries: list[Entry]
    epoch: int = 0
    voided: bool = False  # ran nowhere: every rank re-queues its requests at the output
    launched: bool = False  # this rank computed it (its KV is real)
    placed: bool = True  # this rank allocated KV for it (a retracting rank did not)
    incarnation: dict[int, int] = field(default_factory=dict)  # rid -> admit_seq at placing
    obs: list[list[int]] = field(default_factory=list)  # [rank, rid, told, local] retractions
    # [rank, rid, told, local] this rank excluded while its siblings run (retraction=partial)
    excluded: list[list[int]] = field(default_factory=list)
    rolled: set[int] = field(default_factory=set)  # rids whose allocation was rolled back
    flip_void: bool = False  # in flight at a flip announced with flip.inflight=void
    flip_voided: bool = False  # ... and it came back voided (the cutover checks it was)

    @property
    def num_reqs(self) -> int:
        return len(self.entries)

    @property
    def num_tokens(self) -> int:
        return sum(e.extend_len for e in self.entries)

    @property
    def rids(self) -> list[int]:
        return [e.rid for e in self.entries]

    def fingerprint(self) -> list[int]:
        """rid and extend length per entry: the proxy carries it so a same-width divergence
        (same row count, different requests) is caught, not only a row-count mismatch."""
        out: list[int] = []
        for e in self.entries:
            out += [e.rid, e.extend_len]
        return out


@dataclass
class Message:
    """A typed message: a fixed integer header plus up to four tensors (no pickle)."""

    kind: Kind
    slot: int = -1
    pass_id: int = -1
    epoch: int = 0
    seq: int = -1
    flags: int = 0
    aux: tuple[int, ...] = ()  # small integers (<= 4) riding in the header
    tensors: list[torch.Tensor] = field(default_factory=list)

    @property
    def num_tensors(self) -> int:
        return len(self.tensors)


@dataclass
class ForwardInputs:
    """What a stage's forward needs for one batch, already resolved against this rank's cache."""

    mode: str  # "prefill" or "decode"
    positions: torch.Tensor  # [T] int64
    qo_indptr: torch.Tensor  # [B+1] int64: new tokens of request b are rows qo[b]:qo[b+1]
    prefix_lens: torch.Tensor  # [B] int64: tokens read from the pool
    req_rows: torch.Tensor  # [B] int64: rows of req_to_token
    out_cache_loc: torch.Tensor  # [T] int64: pool slots the new tokens' KV goes to
    sample_rows: torch.Tensor  # [B'] int64: rows whose logits are sampled (final chunks)
    input_ids: torch.Tensor | None = None  # [T] on the first stage
    hidden: torch.Tensor | None = None  # [T, H] from the previous stage

    @property
    def num_tokens(self) -> int:
        return int(self.positions.numel())

    @property
    def num_reqs(self) -> int:
        return int(self.req_rows.numel())
