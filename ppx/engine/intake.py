"""Rank 0's side of the frontend: drain new requests, refuse what cannot fit, stream tokens.

Refusal happens here, before a request enters the chain, with a named reason; the frontend
counts it in `refused`, so `submitted == served + refused` holds on every served run.
"""

from __future__ import annotations

import queue

from ppx.core import Flag, Req

IDLE_WAIT_S = 0.004  # an idle rank 0 sleeps on the queue instead of spinning the pipeline


class Intake:
    def __init__(self, in_q, out_q, max_context: int, min_pool: int, max_drain: int = 64) -> None:
        self.in_q, self.out_q = in_q, out_q
        self.max_context, self.min_pool, self.max_drain = max_context, min_pool, max_drain
        self.shutdown = False
        self.pending_out: list = []

    def refuse_reason(self, prompt_len: int, max_new: int) -> str | None:
        total = prompt_len + max_new
        if prompt_len < 1:
            return "empty prompt"
        if total > self.max_context:
            return f"prompt_len {prompt_len} + max_new {max_new} > max_context {self.max_context}"
        if total > self.min_pool - 1:
            return f"prompt_len {prompt_len} + max_new {max_new} > smallest KV pool {self.min_pool} - 1"
        return None

    def take(self, idle: bool) -> tuple[list[Req], int]:
        self.flush_out()
        reqs: list[Req] = []
        flags = 0
        block = idle and not self.shutdown
        while len(reqs) < self.max_drain:
            try:
                item = self.in_q.get(timeout=IDLE_WAIT_S) if block else self.in_q.get_nowait()
            except queue.Empty:
                break
            block = False
            if item is None:
                self.shutdown = True
                continue
            rid, prompt, max_new = item
            reason = self.refuse_reason(len(prompt), max_new)
            if reason is not None:
                self.out_q.put([("refuse", rid, reason)])
                continue
            reqs.append(Req(rid, list(prompt), max_new))
        if self.shutdown and idle and not reqs:
            flags |= Flag.SHUTDOWN
        return reqs, flags

    def token(self, rid: int, tok: int, finished: bool, cached: int) -> None:
        self.pending_out.append(("tok", rid, tok, finished, cached))

    def flush_out(self) -> None:
        if self.pending_out:
            self.out_q.put(self.pending_out)
            self.pending_out = []
