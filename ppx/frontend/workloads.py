"""Workloads: synthetic generators (the i-th request is a pure function of (config, seed, i)),
prompt files (`jsonl`, ShareGPT's JSON) and public traces (Azure, BurstGPT, Mooncake; see
traces.py). The flags of `vllm bench serve` / `sglang.bench_serving` each have a key here
(the mapping: docs/running.md)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ppx.frontend.arrivals import gap, is_open_loop


@dataclass(frozen=True)
class Request:
    rid: int
    prompt: list[int]
    max_new: int
    error: str = ""  # set: the request is refused at submission with this reason


def source_index(w, i: int) -> int:
    """The prompt request `i` serves: with `workload.bench.repeat_count=K` each prompt K times
    in a row (vLLM's benchmark_prefix_caching.py `--repeat-count`, in its `--sort` order: a
    copy arrives after the one before it, so with room the radix tree holds the whole
    prompt when it is admitted; a seeded shuffle would need the run's last rid, which an
    open-ended `duration_s` run has not), and none of `workload.skip`'s."""
    return kept_source(i // max(int(w.bench.repeat_count), 1), w.skip)


def kept_source(n: int, skip) -> int:
    """The `n`-th prompt index not in `skip` (`workload.skip`: prompts left out, so a run of
    the others serves each one as the full run did -- how a shrunk scenario deletes a
    request from the middle; a prompt is a pure function of its index)."""
    for s in sorted(set(skip)):
        if s <= n:
            n += 1
    return n


def with_repeats(w, distinct: int) -> int:
    """How many requests `distinct` prompts make, each served `repeat_count` times."""
    return distinct * max(int(w.bench.repeat_count), 1)


def length_range(center: int, range_ratio: float) -> tuple[int, int]:
    """vLLM's random dataset: lengths uniform in [floor(L*(1-r)), ceil(L*(1+r))], at least 1."""
    lo = max(1, math.floor(center * (1 - range_ratio)))
    return lo, max(lo, math.ceil(center * (1 + range_ratio)))


class Workload:
    """shared_prefix: one (or a few) long shared prefixes + varied tails; random: independent
    prompts (vLLM's input_len/output_len/range_ratio when input_len > 0); long_prompt: prompts
    several chunks long; generated_shared_prefix: sglang's groups x prompts_per_group, each
    group one system prompt (prefix_len) + a question (prompt_min..prompt_max)."""

    tokenizer = None  # a text.Codec when the model has one: requests.parquet gains text

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
        self.prompt_range = (
            length_range(int(w.bench.input_len), float(w.bench.range_ratio))
            if int(w.bench.input_len) > 0
            else (int(w.prompt_min), int(w.prompt_max))
        )
        out = int(w.bench.output_len)
        self.output_range = (
            length_range(out, float(w.bench.range_ratio)) if out > 0 else (int(w.max_new),) * 2
        )

    def _group(self, i: int) -> int:
        per_group = int(self.w.bench.prompts_per_group)
        # generated_shared_prefix: group-major (sglang's order before its shuffle); the
        # other generators cycle through their prefixes
        return i // per_group if per_group > 0 else i % len(self.prefixes)

    def request(self, i: int) -> Request:
        src = source_index(self.w, i)  # a repeated prompt is drawn as its first copy was
        rng = random.Random(f"req/{self.seed}/{src}")
        n = rng.randint(*self.prompt_range)
        tail = [rng.randrange(1, self.vocab) for _ in range(n)]
        head = self.prefixes[self._group(src) % len(self.prefixes)] if self.prefixes else []
        lo, hi = self.output_range
        max_new = rng.randint(lo, hi) if hi > lo else lo  # one draw only when it varies
        return Request(i, head + tail, max_new)

    @property
    def count(self) -> int:
        """How many requests a run submits (unless `duration_s` keeps it going)."""
        return int(self.w.num_requests)

    @property
    def open_ended(self) -> bool:
        return float(self.w.duration_s) > 0

    @property
    def timed(self) -> bool:
        """Arrivals paced by the clock (a rate, or a trace's timestamps), not by completions."""
        return is_open_loop(float(self.w.rate))

    def arrivals(self) -> random.Random:
        return random.Random(f"arrivals/{self.seed}")

    def loader_counts(self) -> dict[str, int]:
        """What reading the workload's source counted (a trace's rows, the ones it refused
        or skipped), for summary.json and the W&B summary; a generator reads no source."""
        return {}

    def gap_after(self, rid: int, rng: random.Random) -> float:
        """Seconds from request `rid`'s arrival to the next one's."""
        return gap(rng, float(self.w.rate), float(self.w.bench.burstiness))


class LinesWorkload(Workload):
    """One request per prompt of a file (`jsonl` lines, ShareGPT conversations), in file
    order, served closed-loop (or paced by `workload.rate`); `workload.num_requests` caps how
    many are taken."""

    def __init__(self, w, lines: list, tokenizer, seed: int) -> None:
        self.w, self.seed, self.lines, self.tokenizer = w, seed, lines, tokenizer

    @property
    def count(self) -> int:
        kept = len(self.lines) - len({i for i in self.w.skip if i < len(self.lines)})
        return min(int(self.w.num_requests), with_repeats(self.w, kept))

    def request(self, i: int) -> Request:
        ln = self.lines[source_index(self.w, i)]
        return Request(i, list(ln.prompt), int(ln.max_new), ln.error)
