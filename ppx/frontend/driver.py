"""The request driver: feeds rank 0 (closed loop, Poisson, bursty or a trace's times), receives the token stream,
measures TTFT and ITL at the frontend, and accounts for every request it submitted."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ppx.frontend.workloads import Request, Workload


@dataclass
class Record:
    req: Request
    submit_t: float
    token_t: list[float] = field(default_factory=list)
    output: list[int] = field(default_factory=list)
    outcome: str = "pending"  # served | refused | lost | mismatch
    reason: str = ""
    cached: int = 0

    @property
    def ttft_ms(self) -> float | None:
        return (self.token_t[0] - self.submit_t) * 1e3 if self.token_t else None

    @property
    def itl_ms(self) -> float | None:
        if len(self.token_t) < 2:
            return None
        return (self.token_t[-1] - self.token_t[0]) / (len(self.token_t) - 1) * 1e3


@dataclass(frozen=True)
class Quota:
    """What the workload lets the driver submit: how many at once (`cap`: vLLM's
    max_concurrency, under any arrival process), paced by the clock or by completions, how
    many in all, until when (`duration_s`)."""

    concurrency: int
    cap: int | None
    timed: bool
    limit: int
    deadline: float | None


@dataclass
class Stream:
    """The run's token stream at the frontend: how many tokens, the first and last one's time
    (the throughput window and the first-token latency of the summary)."""

    tokens: int = 0
    first_t: float | None = None
    last_t: float | None = None

    def token(self, now: float) -> None:
        self.tokens += 1
        self.first_t = self.first_t or now
        self.last_t = now


class Driver:
    def __init__(
        self, workload: Workload, in_q, out_q, t0: float, clock: Callable[[], float] = time.time
    ) -> None:
        # `clock`: wall time, or the simulator's virtual time (arrivals, TTFT and ITL in it)
        self.wl, self.in_q, self.out_q, self.t0, self.clock = workload, in_q, out_q, t0, clock
        w = workload.w
        # `max_concurrency` (vLLM's flag): caps requests in flight under any arrival process;
        # in the closed loop it is the loop's width, else `concurrency` is
        cap = int(w.bench.max_concurrency)
        deadline = t0 + float(w.duration_s) if workload.open_ended else None
        # read once: the workload's properties read the config, and the loop asks every step
        self.quota = Quota(
            cap if cap > 0 else int(w.concurrency),
            cap if cap > 0 else None,
            workload.timed,
            workload.count,
            deadline,
        )
        self.records: dict[int, Record] = {}
        self.next_rid = 0
        self.active = 0
        self.rng = workload.arrivals()
        self.next_arrival = self.clock()
        self.stream = Stream()  # every token the run streamed, and when
        self.shutdown_sent = False

    # -- submission -------------------------------------------------------------------------
    def _more(self, now: float) -> bool:
        q = self.quota
        if q.deadline is not None:
            return now < q.deadline
        return self.next_rid < q.limit

    def _submit(self, now: float) -> None:
        req = self.wl.request(self.next_rid)
        self.next_rid += 1
        self.records[req.rid] = Record(req, now)
        if req.error:  # a bad line of a prompt file: refused here, the rest still served
            self.records[req.rid].outcome, self.records[req.rid].reason = "refused", req.error
            return
        self.active += 1
        self.in_q.put((req.rid, req.prompt, req.max_new))

    def pump(self) -> None:
        now = self.clock()
        if self.quota.timed:
            while self._more(now) and self.next_arrival <= now:
                if self.quota.cap is not None and self.active >= self.quota.cap:
                    break  # vLLM's semaphore: the arrival waits for a request to finish
                rid = self.next_rid
                self._submit(now)
                self.next_arrival += self.wl.gap_after(rid, self.rng)
        else:
            while self._more(now) and self.active < self.quota.concurrency:
                self._submit(now)

    def next_wake(self) -> float | None:
        """When the driver next wants to submit on its own (a Poisson arrival); None when
        only a token coming back can make it submit (closed loop) or nothing remains."""
        if self.quota.timed and self._more(self.next_arrival):
            if self.quota.cap is not None and self.active >= self.quota.cap:
                return None  # only a finishing request frees the arrival
            return self.next_arrival
        return None

    # -- the token stream -------------------------------------------------------------------
    def collect(self, timeout: float = 0.0) -> int:
        got = 0
        while True:
            try:
                batch = (
                    self.out_q.get(timeout=timeout)
                    if timeout and not got
                    else self.out_q.get_nowait()
                )
            except queue.Empty:
                return got
            now = self.clock()
            for item in batch:
                got += 1
                rec = self.records[item[1]]
                if item[0] == "refuse":
                    rec.outcome, rec.reason = "refused", item[2]
                    self.active -= 1
                    continue
                _, _, tok, finished, cached = item
                rec.cached = cached
                rec.output.append(tok)
                rec.token_t.append(now)
                self.stream.token(now)
                if finished:
                    rec.outcome = "served"
                    self.active -= 1

    @property
    def done(self) -> bool:
        return not self._more(self.clock()) and self.active == 0

    def request_shutdown(self) -> None:
        if not self.shutdown_sent:
            self.in_q.put(None)
            self.shutdown_sent = True

    def finalize(self) -> None:
        """Whatever is still pending when the run ends is lost, and counted as such."""
        for rec in self.records.values():
            if rec.outcome == "pending":
                rec.outcome, rec.reason = "lost", "run ended before the request finished"

    def count(self, outcome: str) -> int:
        return sum(r.outcome == outcome for r in self.records.values())
