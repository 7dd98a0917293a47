"""Every interleaving of one bounded scenario, to completion: `explore.strategy=exhaustive`.

The walk is dfs.py's (a node per step, replayed from the start each run, backtracking to
the deepest node with an untried task) with no step or delay bound, and two reductions:

- sleep sets over step footprints (`explore.reduce=sleep`, dfs.py): a task whose step was
  explored at a node sleeps in its siblings' subtrees while only steps independent of it
  run; sleep sets alone visit every reachable state (they cut transitions, not states);
- state caching (`explore.exhaustive.cache=true`): at each new step the run's state is fingerprinted
  (fingerprint.py) and kept in a visited set with the sleep set it was entered with. A
  state seen before with a sleep set that is a subset of the current one is not explored
  again: everything below it was explored from the first visit (Godefroid's condition for
  combining sleep sets with a visited set); otherwise it is explored and its stored set
  becomes the intersection.

What the walk keeps is the state graph: per state, per task run from it, the next state (or
the end the run reached). A run that meets a state already on its own path has found a
cycle: a state that repeats with nothing in between that the fingerprint sees (no token
committed, no request gone: both are in the state), a livelock, reported with the cycle.
With `explore.exhaustive.liveness` the walk also keeps, per state, its abstract digest (the state
without its monotone counters, liveness_forms.py) and its progress (tokens committed,
requests gone): liveness.py finds the fair cycles of that graph after the walk.

`refuted`: some end is a failure; the trace of each failure key is the shortest path in
steps from the first state to an end with that key, by breadth-first search over the
graph (sleep sets only drop a step when an equivalent order of the same length is kept, and
a cached state keeps the edges of its first visit, so the graph holds a shortest trace
of every end), replayed once to check it, and saved like every failure.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from ppx.sim.dfs import DfsStrategy, DfsWalker
from ppx.sim.fingerprint import Fingerprint
from ppx.sim.liveness import progress_of
from ppx.sim.liveness_forms import Abstraction
from ppx.sim.liveness_graph import unwind

END = "end"  # a graph edge's target that is a run's end: (END, row index)


@dataclass
class Stats:
    states: int = 0  # distinct states (fingerprints)
    transitions: int = 0  # distinct (state, task) steps run
    cached: int = 0  # runs cut at a state explored before
    cycles: list[list[bytes]] = field(default_factory=list)  # states of each cycle found
    depth: int = 0  # the longest run, in steps


class ExhaustiveWalker(DfsWalker):
    """dfs.py's walker without bounds, with a visited set and the state graph."""

    def __init__(
        self,
        sleep: bool,
        cache: bool,
        fingerprint: Fingerprint | None,
        abstraction: Abstraction | None = None,
    ) -> None:
        super().__init__(0, sleep)
        self.cache, self.fp, self.abstraction = cache, fingerprint, abstraction
        self.abstract: dict[bytes, bytes] = {}  # state -> its abstract digest (liveness)
        self.progress: dict[bytes, int] = {}  # state -> tokens committed + requests gone
        self.visited: dict[bytes, frozenset[int]] = {}  # state -> the sleep set it had
        self.graph: dict[bytes, dict[int, tuple[int, object]]] = {}  # -> tid: (mask, next)
        self.digests: list[bytes] = []  # the digest of each node on the path
        self.start: bytes | None = None  # the first state
        self.stats = Stats()
        self.deadline: float | None = None  # perf_counter time the walk stops at (a budget)
        self.out_of_time = False  # the budget ended the walk (inside a run, too)

    def past_deadline(self) -> bool:
        """Has the walk's budget (`explore.budget_s`) run out?"""
        return self.deadline is not None and time.perf_counter() > self.deadline

    def strategy(self) -> ExhaustiveStrategy:
        return ExhaustiveStrategy(self)

    def edge(self, k: int, target) -> None:
        """The step chosen at node k of the path led to `target` (a state or an end)."""
        if k < 0 or self.fp is None:
            return
        node = self.path[k]
        out = self.graph.setdefault(self.digests[k], {})
        if node.chosen not in out:
            self.stats.transitions += 1
        out[node.chosen] = (sum(1 << t for t in node.ready), target)

    def enter(self, digest: bytes, asleep: frozenset[int], depth: int) -> bool:
        """A new state at path depth `depth`: False when it needs no exploring."""
        if depth == 0:
            self.start = digest
        if digest in self.digests[:depth]:  # back on the run's own path: a cycle
            self.stats.cycles.append(self.digests[self.digests.index(digest) : depth])
            return False
        old = self.visited.get(digest)
        if old is None:
            self.stats.states += 1
            self.visited[digest] = asleep
            return True
        if self.cache and old <= asleep:
            self.stats.cached += 1
            return False
        self.visited[digest] = old & asleep
        return True

    def record_end(self, row_index: int | None) -> None:
        """After a run: its last step's edge to the end it reached, then backtrack."""
        if self.out_of_time:  # the run was cut for the budget, not covered: no backtracking
            return
        if row_index is not None and self.path:
            self.stats.depth = max(self.stats.depth, len(self.path))
            self.edge(len(self.path) - 1, (END, row_index))
        self.record(blocked=row_index is None)
        del self.digests[len(self.path) :]

    def shortest(self, rows: list[dict], want) -> list[tuple[int, int]] | None:
        """Breadth-first from the first state: the steps to the nearest end whose row
        satisfies `want`, as the (task, runnable mask) of each step."""
        if self.start is None:
            return None
        back: dict[object, tuple[object, int, int] | None] = {self.start: None}
        todo = deque([self.start])
        while todo:
            s = todo.popleft()
            for tid, (mask, nxt) in sorted(self.graph.get(s, {}).items()):
                if nxt in back:
                    continue
                back[nxt] = (s, tid, mask)
                if isinstance(nxt, tuple) and nxt[0] == END:
                    if want(rows[nxt[1]]):
                        return unwind(back, nxt)
                    continue
                todo.append(nxt)
        return None


def walk_to_the_end(runner, walker: ExhaustiveWalker) -> ExhaustiveWalker:
    """Every run of `walker` on `runner` until the walk is exhausted, keeping only what the
    walker keeps (states, graph; no rows, no verdict): a walk compared with another."""
    while not walker.exhausted:
        res = runner.run(walker.strategy())
        walker.record_end(None if res is None else 0)
    return walker


def choice_points(steps: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A trace's steps as a schedule's choices: the steps where more than one task could run."""
    return [(t, m) for t, m in steps if m & (m - 1)]


class ExhaustiveStrategy(DfsStrategy):
    """One run of the walk: dfs's replay and extension, and at each new step the state's
    fingerprint checked against the visited set (every step is watched)."""

    def choose(self, ready: list[int], point: int, sched) -> int | None:
        w, k = self.w, self.k
        if k < len(w.path) or w.fp is None:
            return super().choose(ready, point, sched)
        if w.past_deadline():
            w.out_of_time = True  # one long run must not outlast the budget (a stall's run)
            return None
        digest = w.fp.of(sched)
        if w.abstraction is not None and digest not in w.abstract:
            w.abstract[digest] = w.abstraction.of(sched)[0]
            w.progress[digest] = progress_of(sched)
        w.edge(k - 1, digest)
        asleep = frozenset(self.awake) if w.reduce else frozenset()
        if not w.enter(digest, asleep, k):
            return None
        tid = super().choose(ready, point, sched)
        if tid is not None:
            w.digests.append(digest)
        return tid
