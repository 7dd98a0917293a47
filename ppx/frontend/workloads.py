"""Workload generators: the i-th request is a pure function of (config, seed, i)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    rid: int
    prompt: list[int]
    max_new: int


class Workload:
    """shared_prefix: one (or a few) long shared prefixes + varied tails; random: independent
    prompts; long_prompt: prompts several chunks long."""

    def __init__(self, w, vocab: int, seed: int) -> None:
        self.w, self.vocab, self.seed = w, vocab, seed
        rng = random.Random(f"prefix/{seed}")
        self.prefixes = (
            [
                [rng.randrange(1, vocab) for _ in range(w.prefix_len)]
                for _ in range(max(w.num_prefixes, 0))
            ]
            if w.prefix_len > 0
            else []
        )

    def request(self, i: int) -> Request:
        rng = random.Random(f"req/{self.seed}/{i}")
        n = rng.randint(self.w.prompt_min, self.w.prompt_max)
        tail = [rng.randrange(1, self.vocab) for _ in range(n)]
        head = self.prefixes[i % len(self.prefixes)] if self.prefixes else []
        return Request(i, head + tail, int(self.w.max_new))

    @property
    def open_ended(self) -> bool:
        return float(self.w.duration_s) > 0

    def arrivals(self) -> random.Random:
        return random.Random(f"arrivals/{self.seed}")
