"""The fair cycles of an exhaustive walk's abstract state graph (liveness.py confirms them).

`fair_cycles`: the abstract graph over the steps that make no progress; every strongly
connected component with an edge (Tarjan, iterative) is a cycle of abstract states in which
no token is committed and no request leaves. For each, a lasso: the shortest trace
(breadth-first over the recorded concrete graph) to a state of the component, then a way
round it -- the shortest, or where that starves a task, one built through a step of every
task that can run in the component (`_round`). Weak fairness (`_fair`): a task runnable at
every step of the lap takes a step in it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass
class Lasso:
    """A trace to a cycle's entry and the cycle: each step as (task, runnable mask)."""

    prefix: list[tuple[int, int]]
    lap: list[tuple[int, int]]
    states: int  # abstract states in its strongly connected component
    fair: bool


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
        out.append(Lasso(unwind(back, s), lap, len(comps[i]), _fair(lap)))
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


def unwind(back: dict, s) -> list[tuple[int, int]]:
    """The steps from a breadth-first search's start to `s`, from its back pointers
    (state -> (previous state, task, runnable mask)), as (task, runnable mask)."""
    steps = []
    while back[s] is not None:
        s, tid, mask = back[s]
        steps.append((tid, mask))
    return steps[::-1]


def _round(still: dict, a: bytes, comp: set[bytes]) -> list[tuple[int, int]]:
    """A way from abstract state `a` back to itself inside its component, weakly fair where
    the component allows it: for each task that can run somewhere in it, one of its steps
    inside it, or a visit to a state where it cannot run (else the shortest way round)."""
    inside = [(b, tid, mask, c) for b in sorted(comp) for tid, (mask, c) in
              sorted(still.get(b, {}).items()) if c in comp]  # fmt: skip
    shortest = _path(inside, a, a, lap=True)
    if _fair(shortest):
        return shortest
    runnable = {b: mask for b, _, mask, _ in inside}  # a state's runnable tasks
    tasks = sorted({t for m in runnable.values() for t in range(m.bit_length()) if m >> t & 1})
    stops: list[tuple] = []  # ("step", edge) or ("at", state), visited in this order
    for t in tasks:
        step = next((e for e in inside if e[1] == t), None)
        idle = next((b for b, m in runnable.items() if not m >> t & 1), None)
        if step is not None:
            stops.append(("step", step))
        elif idle is not None:
            stops.append(("at", idle))
        else:  # runnable everywhere in the component and never run in it: no fair lap
            return shortest
    lap, here = [], a
    for kind, what in stops:
        if kind == "step":
            b, tid, mask, c = what
            lap += _path(inside, here, b) + [(tid, mask)]
            here = c
        else:
            lap += _path(inside, here, what)
            here = what
    lap += _path(inside, here, a)
    return lap or shortest


def _path(inside: list, x: bytes, y: bytes, lap: bool = False) -> list[tuple[int, int]]:
    """The shortest steps from x to y over the component's edges (`lap`: at least one)."""
    if x == y and not lap:
        return []
    out: dict[bytes, list[tuple]] = {}
    for b, tid, mask, c in inside:
        out.setdefault(b, []).append((tid, mask, c))
    back: dict = {}
    todo = deque([x])
    while todo:
        b = todo.popleft()
        for tid, mask, c in out.get(b, ()):
            if c in back:
                continue
            back[c] = (b, tid, mask)
            if c == y:
                steps, z = [], y
                while True:
                    p, t, m = back[z]
                    steps.append((t, m))
                    z = p
                    if z == x:
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
