"""Host KV tier: evicted prefixes go to host memory; a background thread loads them back.

The load-back is asynchronous and its completion time is rank-local (`prefetch_ms` per rank),
so "is this prefix here yet?" gets different answers on different ranks at the same pass:
an honest divergence source. While a load is pending the rank reports its coverage as
unresolved (never as 0: it is not a measurement).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

import torch


@dataclass
class HostEntry:
    path: tuple[int, ...]  # tokens from the root through the end of the evicted leaf
    start: int  # where the leaf began (tokens before it stay in the tree or in other entries)
    k: list[torch.Tensor]  # per layer [n, kv_heads, head_dim] on the host
    v: list[torch.Tensor]
    slots: list[int] = field(default_factory=list)  # pool slots while loading
    done: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False

    @property
    def length(self) -> int:
        return len(self.path) - self.start


class HostTier:
    def __init__(
        self, k_pool: list[torch.Tensor], v_pool: list[torch.Tensor], prefetch_s: float
    ) -> None:
        self.k_pool, self.v_pool, self.prefetch_s = k_pool, v_pool, prefetch_s
        # keyed by the tokens before the leaf plus its first token (siblings differ there)
        self.entries: dict[tuple[int, ...], HostEntry] = {}
        self.loading: dict[tuple[int, ...], HostEntry] = {}
        self.jobs: queue.Queue = queue.Queue()
        self.lock = threading.Lock()  # a cancelled load must never write into reused slots
        self.loads = self.saves = 0
        threading.Thread(target=self._worker, name="ppx-prefetch", daemon=True).start()

    def rebind(self, k_pool: list[torch.Tensor], v_pool: list[torch.Tensor]) -> None:
        """A new pool for the same layout (after a flip came back): loads under way targeted
        the old pool and are dropped; what was saved stays loadable."""
        self.cancel_all()
        with self.lock:
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
        """Is a load of what extends `tokens[:matched]` under way?"""
        return tuple(tokens[: matched + 1]) in self.loading

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
        self.loading[key] = e
        self.jobs.put(e)
        return True

    def _worker(self) -> None:
        while True:
            e = self.jobs.get()
            time.sleep(self.prefetch_s)  # the rank-local part: a slow host link on this rank
            with self.lock:
                if e.cancelled:
                    continue
                idx = torch.tensor(e.slots, dtype=torch.int64, device=self.k_pool[0].device)
                for layer, (k, v) in enumerate(zip(e.k, e.v)):
                    self.k_pool[layer][idx] = k.to(self.k_pool[layer].device)
                    self.v_pool[layer][idx] = v.to(self.v_pool[layer].device)
                e.done.set()

    def cancel_all(self) -> list[int]:
        """Admissions come first: give back the slots of loads not landed yet (the host
        copies stay, loadable later)."""
        freed = []
        with self.lock:
            for key, e in list(self.loading.items()):
                if e.done.is_set():
                    continue
                e.cancelled = True
                freed += e.slots
                del self.loading[key]
                self.entries[key] = HostEntry(e.path, e.start, e.k, e.v)
        return freed

    def finished(self) -> list[HostEntry]:
        """Loads whose copy completed; the caller inserts them into the tree (main thread)."""
        out = [e for e in self.loading.values() if e.done.is_set()]
        for e in out:
            del self.loading[e.path[: e.start + 1]]
            self.loads += 1
        return out

    @property
    def loading_slots(self) -> list[int]:
        return [s for e in self.loading.values() for s in e.slots]
