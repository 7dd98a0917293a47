"""Workloads: synthetic generators (the i-th request is a pure function of (config, seed, i))
and `jsonl`, real prompts read from a file (`workload=jsonl workload.path=FILE`)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    rid: int
    prompt: list[int]
    max_new: int
    error: str = ""  # set: the request is refused at submission with this reason


class Workload:
    """shared_prefix: one (or a few) long shared prefixes + varied tails; random: independent
    prompts; long_prompt: prompts several chunks long."""

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


class JsonlWorkload(Workload):
    """One request per non-blank line of `workload.path`, in file order, served closed-loop
    (or Poisson with `workload.rate`); `workload.num_requests` caps how many are taken."""

    def __init__(self, w, lines: list, tokenizer, seed: int) -> None:
        self.w, self.seed, self.lines, self.tokenizer = w, seed, lines, tokenizer

    def request(self, i: int) -> Request:
        ln = self.lines[i]
        return Request(i, list(ln.prompt), int(ln.max_new), ln.error)


def make_workload(cfg) -> Workload:
    """The workload a (validated) config names, with the model's tokenizer when it has one."""
    from ppx.frontend.text import load_tokenizer, read_jsonl, tokenizer_file

    file = tokenizer_file(cfg.model)
    tok = load_tokenizer(file, int(cfg.model.vocab)) if file else None
    w = cfg.workload
    if w.name == "jsonl":
        lines = read_jsonl(str(w.path), tok, int(w.max_new), int(cfg.model.max_context))
        return JsonlWorkload(w, lines, tok, int(cfg.seed))
    wl = Workload(w, int(cfg.model.vocab), int(cfg.seed))
    wl.tokenizer = tok
    return wl
