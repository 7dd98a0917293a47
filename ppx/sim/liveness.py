"""Livelock as a fair cycle of the state graph, found as such.

The exhaustive walk (exhaustive.py) records per concrete state its abstract digest
(liveness_forms.py: the state without its monotone counters) and its progress (tokens
committed and requests gone so far), and per step the edge to the next state. Here:

1. `fair_cycles`: the abstract graph over the steps that make no progress; every strongly
   connected component with an edge (Tarjan) is a cycle of abstract states in which no token
   is committed and no request leaves. For each, a lasso: the shortest trace (breadth-first
   over the recorded graph) to a state of the component, then the shortest way round it.
   Weak fairness: a task runnable in every state of the lap takes a step in it (else the
   cycle is the scheduler starving a task, not the engine's livelock).
2. `pump`: the lasso replayed -- the trace, then the lap again and again -- with the
   abstract digest, the counter vector and the progress read at the first three lap
   boundaries. Confirmed when the three digests are one, nothing progressed, and the
   counters moved by the same amount on both laps (the lap is a shift of the counters, so
   it repeats forever in the engine without its pass-count bound). The run is pumped on
   until it ends by itself: its choices are the failure's schedule (replayable as every
   failure is; where the engine has a pass-count bound, it ends `livelocked` by it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ppx.sim.liveness_forms import Abstraction
from ppx.sim.strategy import Strategy

LAPS = 3  # lap boundaries read when pumping: the entry and two laps
MAX_LAPS = 500  # then the lowest runnable task goes (an engine with no pass-count bound)


@dataclass
class Lasso:
    """A trace to a cycle's entry and the cycle: each step as (task, runnable mask)."""

    prefix: list[tuple[int, int]]
    lap: list[tuple[int, int]]
    states: int  # abstract states in its strongly connected component
    fair: bool


@dataclass
class Pumped:
    confirmed: bool
    why: str  # what failed, when not confirmed
    verdict: str = ""  # the pumped run's own end
    reason: str = ""
    choices: list[tuple[int, int]] = field(default_factory=list)
    shift: list[int] = field(default_factory=list)  # the counters' move per lap
    cycle: list[dict] = field(default_factory=list)  # the lap's states, post-mortem terms


def progress_of(sched) -> int:
    """Tokens rank 0 committed plus requests the frontend saw leave: grows on progress only.
    Read through the run's progress watch (the simulated supervisor's bound method)."""
    sup = getattr(sched.watch, "__self__", None)
    if sup is None or not hasattr(sup, "driver"):
        return 0
    left = sum(r.outcome is not None for r in sup.driver.records.values())
    return len(sup.out_q.history) + left


def strongly_connected(edges: dict[bytes, set[bytes]]) -> list[list[bytes]]:
    """Tarjan's components (iterative) that hold a cycle: two states or more, or a self-loop."""
    index: dict[bytes, int] = {}
    low: dict[bytes, int] = {}
    on, stack, out = set(), [], []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in edges.get(v, ()):
                    out.append(comp)
    return out


def fair_cycles(
    graph: dict, start: bytes | None, abstract: dict[bytes, bytes], progress: dict[bytes, int]
) -> list[Lasso]:
    """The lassos of the no-progress cycles of the abstract graph, nearest entry first.
    `graph`: concrete state -> {task: (runnable mask, next state or an end)}."""
    if start is None:
        return []
    still: dict[bytes, dict[int, tuple[int, bytes]]] = {}  # abstract -> task: (mask, next)
    for s, out in graph.items():
        a = abstract.get(s)
        for tid, (mask, nxt) in out.items():
            if a is None or nxt not in abstract or progress[nxt] != progress[s]:
                continue  # an end, or a step that committed a token / let a request go
            still.setdefault(a, {}).setdefault(tid, (mask, abstract[nxt]))
    comps = strongly_connected({a: {b for _, b in o.values()} for a, o in still.items()})
    member = {a: i for i, comp in enumerate(comps) for a in comp}
    out, back = [], _bfs(graph, start)
    for s in back:  # breadth-first order: the nearest entry first
        i = member.pop(abstract.get(s, b""), None)
        if i is None:
            continue
        for a in comps[i]:
            member.pop(a, None)
        lap = _round(still, abstract[s], set(comps[i]))
        out.append(Lasso(_unwind(back, s), lap, len(comps[i]), _fair(lap)))
    return out


def _bfs(graph: dict, start: bytes) -> dict:
    back: dict = {start: None}
    todo = deque([start])
    while todo:
        s = todo.popleft()
        for tid, (mask, nxt) in sorted(graph.get(s, {}).items()):
            if isinstance(nxt, bytes) and nxt not in back:
                back[nxt] = (s, tid, mask)
                todo.append(nxt)
    return back


def _unwind(back: dict, s) -> list[tuple[int, int]]:
    steps = []
    while back[s] is not None:
        s, tid, mask = back[s]
        steps.append((tid, mask))
    return steps[::-1]


def _round(still: dict, a: bytes, comp: set[bytes]) -> list[tuple[int, int]]:
    """The shortest way from abstract state `a` back to itself inside its component."""
    back: dict = {}
    todo = deque([a])
    while todo:
        b = todo.popleft()
        for tid, (mask, c) in sorted(still.get(b, {}).items()):
            if c not in comp or c in back:
                continue
            back[c] = (b, tid, mask)
            if c == a:
                steps, x = [], a
                while True:
                    y, t, m = back[x]
                    steps.append((t, m))
                    x = y
                    if x == a:
                        return steps[::-1]
            todo.append(c)
    return []


def _fair(lap: list[tuple[int, int]]) -> bool:
    """Weak fairness: every task runnable at each step of the lap takes a step in it."""
    if not lap:
        return False
    always = ~0
    for _, mask in lap:
        always &= mask
    ran = 0
    for tid, _ in lap:
        ran |= 1 << tid
    return always & ~ran == 0


class PumpStrategy(Strategy):
    """The lasso's trace, then its lap over and over, reading the lap boundaries."""

    watches_steps = True

    def __init__(self, lasso: Lasso, abstraction: Abstraction, describe) -> None:
        self.prefix = [t for t, _ in lasso.prefix]
        self.lap = [t for t, _ in lasso.lap]
        self.ab, self.describe = abstraction, describe
        self.k = 0
        self.marks: list[tuple[bytes, tuple[int, ...], int]] = []  # (digest, counters, progress)
        self.cycle: list[dict] = []
        self.off: str | None = None  # the step where the lasso could not be followed

    def choose(self, ready: list[int], point: int, sched) -> int | None:
        k, self.k = self.k, self.k + 1
        if k < len(self.prefix):
            return self._take(self.prefix[k], ready, k)
        i = k - len(self.prefix)
        if i // len(self.lap) >= MAX_LAPS or self.off is not None:
            return ready[0]
        if i % len(self.lap) == 0 and len(self.marks) < LAPS:
            d, counters = self.ab.of(sched)
            self.marks.append((d, counters, progress_of(sched)))
        if len(self.marks) == 1:  # the first lap: its states, in the post-mortem's terms
            self.cycle.append(self.describe(sched))
        return self._take(self.lap[i % len(self.lap)], ready, k)

    def _take(self, tid: int, ready: list[int], k: int) -> int:
        if tid in ready:
            return tid
        self.off = f"step {k}: the lasso runs task {tid}, runnable are {ready}"
        return ready[0]


def pump(runner, lasso: Lasso, abstraction: Abstraction, describe) -> Pumped:
    """Replay the lasso and check it is a livelock (the module docstring)."""
    s = PumpStrategy(lasso, abstraction, describe)
    res = runner.run(s)
    got = Pumped(False, "", cycle=s.cycle)
    if res is not None:
        got.verdict, got.reason, got.choices = res.verdict, res.row["reason"], res.choices
    marks = s.marks
    if len(marks) < LAPS:
        got.why = s.off or f"the run ended after {len(marks)} lap boundaries"
        return got
    (d0, c0, p0), (d1, c1, p1), (d2, c2, p2) = marks[:LAPS]
    if not d0 == d1 == d2:
        got.why = "the abstract state did not repeat"
    elif not p0 == p1 == p2:
        got.why = "a token was committed or a request left in the lap"
    elif not len(c0) == len(c1) == len(c2):
        got.why = "the counters changed shape"
    else:
        got.shift = [b - a for a, b in zip(c0, c1, strict=True)]
        if got.shift != [b - a for a, b in zip(c1, c2, strict=True)]:
            got.why = "the counters did not move by the same amount on two laps"
        elif not lasso.fair:
            got.why = "the lap starves a task that is runnable throughout (not weakly fair)"
        else:
            got.confirmed = True
    return got
