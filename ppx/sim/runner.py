"""One simulated schedule, judged: the engine run under a strategy, then the oracle.

A `Runner` is made once per exploration (per worker) and runs every schedule of it: the
typed config, the stage models (weights are immutable) and the oracle's reference are built
once and reused; what a run mutates (ranks, caches, wire, board) is made fresh per run.
A served run whose tokens differ from the reference is a failure like a wedge: verdict
`mismatch`, the first wrong token its reason.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass, field, replace

from omegaconf import OmegaConf

from ppx.frontend.make import make_workload
from ppx.judge import judge_served
from ppx.oracle import Mismatch, Oracle, sample_rids
from ppx.sim.coverage import counters_of
from ppx.sim.ends import END_COLUMNS, end_record
from ppx.sim.world import SimSupervisor
from ppx.telemetry import summary

CHECKED_MAX = 4096  # (prompt, tokens) pairs the oracle memo keeps before it starts over

COLUMNS = [
    "schedule",
    "strategy",
    "verdict",
    "reason",
    "cycle",
    "tokens",
    "served",
    "tokens_checked",
    "steps",
    "virtual_s",
    *END_COLUMNS,
]


@dataclass
class Result:
    row: dict  # the explore.parquet row, less `schedule` and `strategy`
    choices: list[tuple[int, int]]
    counters: dict[str, int] = field(default_factory=dict)  # the counters > 0 (coverage.py)

    @property
    def delays(self) -> int:
        return delays(self.choices)

    @property
    def verdict(self) -> str:
        return self.row["verdict"]

    @property
    def key(self) -> str:
        return failure_key(self.row["verdict"], self.row["reason"], self.row["cycle"])


def failure_key(verdict: str, reason: str, cycle: str | None) -> str:
    """One bug, one key: the verdict and the cycle (ranks and operations kept; slot, pass,
    seq numbers blanked), else the reason with every number blanked -- the slot a request
    landed in, the pass, the rid and the counts vary from schedule to schedule."""
    if cycle:
        what = re.sub(r"(slot|pass|seq)=\d+", r"\1=#", cycle)
    else:
        what = re.sub(r"\d+", "#", reason or "")
        # a list of numbers (the rids outstanding at a stall or a loss) is as long as the
        # scenario is big: with its length in the key, the hold_forever and
        # tp_void_no_requeue mutants' stalls with three outstanding never shrank to two
        what = re.sub(r"\[-?#(?:, -?#)*\]", "[#, ...]", what)[:120]
    return f"{verdict}: {what}"


def delays(choices: list[tuple[int, int]]) -> int:
    """How far a schedule is from the lowest-runnable-task scheduler: at each choice point,
    the number of runnable tasks with a lower id than the one chosen. (A task runs until it
    blocks, so no choice ever preempts a runnable task: these are what a schedule does
    differently, and what a delay bound counts.)"""
    return sum(bin(mask & ((1 << tid) - 1)).count("1") for tid, mask in choices)


class SharedModels(dict):
    """The stage models and KV caches every run of one Runner shares (engine/plan.py keeps
    them here by phase and rank). A dict subclass, not a dict: the state fingerprint writes
    it by identity, and pickle never asks its reader about an exact dict (fingerprint.py).

    No run reads what an earlier run left in it: a model's weights are immutable and its TP
    all-reduce is rebound when a run takes it, and a cache is reset in place before a run
    uses it. Written by value, the previous schedule's leftovers (the pools of a rank that
    has not reached its first plan yet, a flipped-away phase's) made one state two digests."""


class Runner:
    def __init__(self, cfg, log: io.TextIOBase | None = None, end_check=None) -> None:
        self.cfg = cfg
        # an end property (gallery_expect.EndProperty): each row's `property_key` is the key
        # of an end it fails ("" for one it does not); None: a failing end is one not served
        self.end_check = end_check
        self.typed = OmegaConf.to_object(cfg)
        self.models: dict = SharedModels()
        # immutable (request i is a pure function of the config, the seed and i): one for
        # every schedule, built from the typed config (no omegaconf read per request)
        self.workload = make_workload(self.typed)
        self.oracle = Oracle.for_config(cfg)
        self.sample, self.seed = float(cfg.oracle.sample), int(cfg.seed)
        # the reference's verdict on (prompt, tokens) never changes, and most schedules serve
        # the same tokens: each pair is checked once per worker (a bounded memo)
        self.checked: dict[tuple, list[Mismatch]] = {}
        self.log = log if log is not None else io.StringIO()

    @property
    def inputs(self) -> tuple:
        """What every run of this Runner reads and none writes into its state (a state's
        fingerprint writes them by identity)."""
        return (self.cfg, self.typed, self.models, self.oracle, self.workload)

    def run(self, strategy) -> Result | None:
        """The run's row, or None when the strategy cut it (the dfs reduction)."""
        events = self.end_check is not None and self.end_check.needs_events
        sup = SimSupervisor(
            self.cfg, None, strategy, self.typed, self.models, self.workload, events
        )
        # the ranks' warnings go to the exploration's log, not to the screen
        with contextlib.redirect_stderr(self.log):
            out = sup.run()
        verdict, reason = out["verdict"], out["reason"]
        if verdict == "pruned":
            return None
        checked, bad = self.check(sup.driver)
        verdict, reason = judge_served(verdict, reason, bad, sup.tally.reports)
        cycle = (out.get("postmortem") or {}).get("cycle")
        row = {
            "verdict": verdict,
            "reason": reason,
            "cycle": cycle,
            "tokens": sup.driver.stream.tokens,
            "served": sup.driver.count("served"),
            "tokens_checked": checked,
            "steps": out["sim"]["steps"],
            "virtual_s": out["sim"]["virtual_s"],
        } | end_record(sup.driver, sup.out_q.history, failure_key(verdict, reason, cycle))
        if self.end_check is not None:
            row["property_key"] = self.end_check(self.end_row(sup, out | row, bad)) or ""
        s = sup.sched
        return Result(row, list(s.choices), counters_of(sup.tally.reports))

    def end_row(self, sup: SimSupervisor, outcome: dict, mismatches: list) -> dict:
        """The end as a study's row of a run has it (summary.build's columns), with the
        events where the end property reads them."""
        s = summary.build(self.typed, None, "", outcome, sup.driver, sup.tally.reports,
                          mismatches, 0.0)  # fmt: skip
        return s | {"events": sup.events() if self.end_check.needs_events else None}

    def check(self, driver) -> tuple[int, list]:
        """Every served request's tokens against the reference (oracle.sample of them)."""
        served = [r for r in driver.records.values() if r.outcome == "served"]
        keep = set(sample_rids([r.req.rid for r in served], self.sample, self.seed))
        checked, bad = 0, []
        for rec in served:
            if rec.req.rid in keep:
                checked += len(rec.output)
                bad += [
                    replace(m, rid=rec.req.rid) for m in self._verdict(rec.req.prompt, rec.output)
                ]
        return checked, bad

    def _verdict(self, prompt: list[int], output: list[int]) -> list[Mismatch]:
        key = (tuple(prompt), tuple(output))
        found = self.checked.get(key)
        if found is None:
            if len(self.checked) >= CHECKED_MAX:
                self.checked.clear()
            found = self.checked[key] = self.oracle.check(prompt, output)
        return found
