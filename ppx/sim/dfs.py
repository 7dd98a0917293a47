"""Bounded exhaustive search over schedules, with sleep-set reduction over footprints.

The tree: a node per scheduling step among the first `bound` steps of a run (a step where
several tasks can run is a choice); past the bound, and at a node not branched yet, the
lowest runnable task goes. A run replays the chosen path from the start (the engine keeps no
state across runs), so the walker is stateless: it keeps the current path and backtracks to
the deepest node with an untried task.

Reduction (`reduce="sleep"`, Godefroid's sleep sets): every step records its footprint, the
shared objects it read and wrote (scheduler.py). Two steps of different tasks whose
footprints do not conflict (no object both touch with one writing) commute: either order
reaches the same state. After the subtree of task t at a node is explored, t "sleeps" in the
subtrees of the node's later choices for as long as only steps independent of t's run
there; a sleeping task is not chosen (that order was covered), and a step where every
runnable task sleeps is cut ("blocked": the run stops there). Because the bound counts steps,
reordering commuting steps keeps a schedule inside it, and the state after the bound, hence
the lowest-runnable continuation and the verdict, is the same: the reduction explores at
least one schedule of every class the plain tree has, and loses no verdict it finds.

Delay bound (`delays=K`): a choice of the i-th runnable task (by id) instead of the lowest
spends i delays; at most K per schedule (Emmi, Qadeer, Rakamaric). Its trees are not closed
under reordering, so it runs without the reduction (validation says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppx.sim.scheduler import WRITE, ReplayMismatch
from ppx.sim.strategy import Strategy


def dependent(a: dict, b: dict) -> bool:
    """Two steps race when they touch an object in different ways or both write it (two
    reads commute, and so do two advances of the clock)."""
    if len(a) > len(b):
        a, b = b, a
    for key, mode in a.items():
        other = b.get(key)
        if other is not None and (mode != other or mode == WRITE):
            return True
    return False


@dataclass
class Node:
    ready: list[int]
    sleep: dict[int, dict]  # asleep on entry: tid -> the footprint of its next step
    chosen: int
    delays: int  # spent on the path before this node
    done: dict[int, dict] = field(default_factory=dict)  # explored here: tid -> footprint
    fp: dict | None = None  # footprint of `chosen`'s step in the current run


class DfsWalker:
    """The tree walk over many runs: `strategy()` gives the next run's strategy, `record()`
    takes what it did, until `exhausted`. `root` restricts the walk to the subtrees of the
    first node whose choices are listed (a shard of a fan-out)."""

    def __init__(
        self,
        bound: int,
        sleep: bool = True,
        delays: int | None = None,
        root: list[int] | None = None,
    ) -> None:
        self.bound = bound if bound > 0 else 1 << 62
        self.reduce, self.delays, self.root = sleep, delays, root
        self.path: list[Node] = []
        self.probed: dict[int, dict] = {}  # another shard's root task -> its footprint
        self.exhausted = False
        self.runs = 0  # schedules run to a verdict
        self.blocked = 0  # runs cut where every runnable task slept
        self.skipped = 0  # choices never run: their task slept at that node

    def strategy(self) -> DfsStrategy:
        return DfsStrategy(self)

    def record(self, blocked: bool) -> None:
        """After a run: backtrack to the deepest node with a choice left."""
        if blocked:
            self.blocked += 1
        else:
            self.runs += 1
        while self.path:
            k = len(self.path) - 1
            node = self.path[k]
            node.done[node.chosen] = node.fp or {}
            nxt = self._next_choice(node, k)
            if nxt is not None:
                node.chosen, node.fp = nxt, None
                return
            self.path.pop()
        self.exhausted = True

    def _next_choice(self, node: Node, depth: int) -> int | None:
        for i, t in enumerate(node.ready):
            if t in node.done:
                continue
            if self.delays is not None and node.delays + i > self.delays:
                return None  # the rest cost more delays still
            if t in node.sleep:
                self.skipped += 1
                node.done[t] = node.sleep[t]
                continue
            return t
        return None

    def first_choice(self, node: Node) -> int | None:
        """A new node's choice: the lowest runnable task that is awake. The first node of a
        shard marks the other shards' tasks explored (with the footprints the probes saw:
        in the whole tree they come first and put those tasks to sleep)."""
        if not self.path and self.root is not None:
            node.done = {t: self.probed.get(t, {}) for t in node.ready if t not in self.root}
        for t in node.ready:
            if t not in node.sleep and t not in node.done:
                return t
        return None

    def probes(self, num_tasks: int) -> list[int]:
        """Tasks whose first step's footprint this shard needs (another shard explores
        them first): one short run each, before the walk."""
        if self.root is None or not self.reduce:
            return []
        return [t for t in range(num_tasks) if t not in self.root and t not in self.probed]


class ProbeStrategy(Strategy):
    """Runs `tid` first, keeps its step's footprint, and stops the run at once."""

    watches_steps = True

    def __init__(self, walker: DfsWalker, tid: int) -> None:
        self.w, self.tid, self.stepped = walker, tid, False

    def choose(self, ready: list[int], point: int, sched) -> int | None:
        return None if self.stepped else self.tid

    def after_step(self, tid: int, fp: dict) -> None:
        self.w.probed[tid], self.stepped = fp, True


class DfsStrategy(Strategy):
    """One run of the walk: replays the path, then extends it (every step is watched)."""

    watches_steps = True

    def __init__(self, walker: DfsWalker) -> None:
        self.w = walker
        self.k = 0  # the step (node) about to run
        self.awake: dict[int, dict] = {}  # the running sleep set
        self.node: Node | None = None

    def choose(self, ready: list[int], point: int, sched) -> int | None:
        w, k = self.w, self.k
        if k >= w.bound:
            self.node = None
            return ready[0]
        if k < len(w.path):  # on the recorded path
            node = w.path[k]
            if node.ready != ready:
                raise ReplayMismatch(
                    f"step {sched.steps}: dfs replay met runnable tasks {ready}, the path "
                    f"recorded {node.ready} (the engine is not deterministic under the same "
                    "choices)"
                )
        else:
            spent = w.path[-1].delays + w.path[-1].ready.index(w.path[-1].chosen) if w.path else 0
            node = Node(list(ready), dict(self.awake) if w.reduce else {}, -1, spent)
            first = w.first_choice(node)
            if first is None:  # every runnable task sleeps: this order was covered
                return None
            node.chosen = first
            w.path.append(node)
        self.node = node
        if w.reduce:  # asleep below this choice: the node's own, and what was explored here
            # before it (tasks come in id order; a probed task of a later shard is not)
            done = {u: f for u, f in node.done.items() if u < node.chosen}
            self.awake = {**node.sleep, **done}
        return node.chosen

    def after_step(self, tid: int, fp: dict) -> None:
        node = self.node
        if node is None:
            return
        node.fp = fp
        self.k += 1
        if self.awake:
            self.awake = {u: f for u, f in self.awake.items() if u != tid and not dependent(f, fp)}
