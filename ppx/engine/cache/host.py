"""Host KV tier: evicted prefixes go to host memory and are loaded back asynchronously.

The load-back's completion time is rank-local (`prefetch_ms` per rank), so "is this prefix
here yet?" gets different answers on different ranks at the same pass: an honest divergence
source. While a load is pending the rank reports its coverage as unresolved (never as 0: it
is not a measurement).

A load lands `prefetch_s` after it started, on the rank's clock (the transport's: wall time
on gloo, virtual time in the simulator, where a landing is a scheduler event and never a
sleep), or, under faults.timing=choice on the simulator, when the scheduler chooses
(`arrival`: ppx/sim/timing.py). The rank only ever learns of a landing by asking (`pending_for`, `finished`), so the
copy is made when it asks: to the rank this is the same as a copy made by a background
thread, and it keeps one mechanism for both clocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ppx.engine.transport.base import Arrival, ClockArrival


@dataclass
class HostEntry:
    path: tuple[int, ...]  # tokens from the root through the end of the evicted leaf
    start: int  # where the leaf began (tokens before it stay in the tree or in other entries)
    k: list[torch.Tensor]  # per layer [n, kv_heads, head_dim] on the host
    v: list[torch.Tensor]
    slots: list[int] = field(default_factory=list)  # pool slots while loading
    landing: Arrival | None = None  # the load under way (None: not loading)

    def landed(self) -> bool:
        return self.landing is not None and self.landing.landed()

    @property
    def length(self) -> int:
        return len(self.path) - self.start


class HostTier:
    def __init__(
        self,
        k_pool: list[torch.Tensor],
        v_pool: list[torch.Tensor],
        prefetch_s: float,
        clock: Callable[[], float] = time.monotonic,
        arrival: Callable[[float, str], Arrival] | None = None,
    ) -> None:
        self.k_pool, self.v_pool, self.prefetch_s = k_pool, v_pool, prefetch_s
        # when a load started now lands: `prefetch_s` later on `clock`, unless the transport
        # lets the simulator's scheduler choose (Transport.arrival)
        self.arrival = arrival or (lambda delay_s, label: ClockArrival(clock, delay_s))
        # keyed by the tokens before the leaf plus its first token (siblings differ there)
        self.entries: dict[tuple[int, ...], HostEntry] = {}
        self.loading: dict[tuple[int, ...], HostEntry] = {}
        self.loads = self.saves = 0

    def rebind(self, k_pool: list[torch.Tensor], v_pool: list[torch.Tensor]) -> None:
        """A new pool for the same layout (after a flip came back): loads under way targeted
        the old pool and are dropped; what was saved stays loadable."""
        self.cancel_all()
        self.k_pool, self.v_pool = k_pool, v_pool
        self.loading.clear()

    def save(self, path: list[int], start: int, slots: list[int]) -> None:
        """Called by eviction before the slots are freed: copy their KV to the host."""
        idx = torch.tensor(slots, dtype=torch.int64)
        key = tuple(path[: start + 1])
        self.entries[key] = HostEntry(
            tuple(path),
            start,
            [k[idx].to("cpu", copy=True) for k in self.k_pool],
            [v[idx].to("cpu", copy=True) for v in self.v_pool],
        )
        self.saves += 1

    def pending_for(self, tokens: list[int], matched: int) -> bool:
        """Is a load of what extends `tokens[:matched]` under way (not landed yet)?"""
        e = self.loading.get(tuple(tokens[: matched + 1]))
        return e is not None and not e.landed()

    def holds(self, tokens: list[int], matched: int) -> bool:
        """Does the host hold a continuation of `tokens[:matched]` (loadable now)?"""
        return tuple(tokens[: matched + 1]) in self.entries

    def start_load(self, tokens: list[int], matched: int, alloc) -> bool:
        """If the host holds the continuation of `tokens[:matched]`, start loading it into
        freshly allocated slots; returns True when a load was started."""
        key = tuple(tokens[: matched + 1])
        e = self.entries.get(key)
        if e is None:
            return False
        n = 0  # the part of the evicted leaf this request shares
        while (
            matched + n < min(len(e.path), len(tokens))
            and e.path[matched + n] == tokens[matched + n]
        ):
            n += 1
        slots = alloc(n)
        if slots is None:
            return False  # no spare room: the prefix is recomputed instead
        del self.entries[key]
        e.path, e.k, e.v, e.slots = (
            e.path[: matched + n],
            [k[:n] for k in e.k],
            [v[:n] for v in e.v],
            slots,
        )
        e.landing = self.arrival(self.prefetch_s, "host load")  # the rank-local part: a slow link
        self.loading[key] = e
        return True

    def cancel_all(self) -> list[int]:
        """Admissions come first: give back the slots of loads not landed yet (the host
        copies stay, loadable later)."""
        freed = []
        for key, e in list(self.loading.items()):
            if e.landed():
                continue
            freed += e.slots
            del self.loading[key]
            self.entries[key] = HostEntry(e.path, e.start, e.k, e.v)
        return freed

    def finished(self) -> list[HostEntry]:
        """Loads whose copy completed; the caller inserts them into the tree (main thread)."""
        out = [e for e in self.loading.values() if e.landed()]
        for e in out:
            idx = torch.tensor(e.slots, dtype=torch.int64, device=self.k_pool[0].device)
            for layer, (k, v) in enumerate(zip(e.k, e.v)):
                self.k_pool[layer][idx] = k.to(self.k_pool[layer].device)
                self.v_pool[layer][idx] = v.to(self.v_pool[layer].device)
            del self.loading[e.path[: e.start + 1]]
            self.loads += 1
        return out

    @property
    def loading_slots(self) -> list[int]:
        return [s for e in self.loading.values() for s in e.slots]
