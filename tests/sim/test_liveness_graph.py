"""Fair cycles on hand-built state graphs (ppx/sim/liveness.py): the components found, the
lasso's trace and lap, progress edges and weak fairness. No engine runs here."""

from __future__ import annotations

from ppx.sim.exhaustive import END
from ppx.sim.liveness import lap_shift
from ppx.sim.liveness_graph import _fair, fair_cycles, strongly_connected

# task 0 and task 1 both runnable: mask 0b11; only task 0: 0b01
BOTH, ZERO = 0b11, 0b01


def graph_of(edges: list[tuple[str, int, int, object]]) -> dict:
    """(state, task, mask, next) rows as the walk's graph: state -> {task: (mask, next)}."""
    g: dict = {}
    for s, tid, mask, nxt in edges:
        g.setdefault(s.encode(), {})[tid] = (mask, nxt.encode() if isinstance(nxt, str) else nxt)
    return g


def identity(g: dict) -> dict[bytes, bytes]:
    states = set(g) | {n for out in g.values() for _, n in out.values() if isinstance(n, bytes)}
    return {s: s for s in states}


def test_tarjan_finds_the_cycles_and_not_the_chains():
    edges = {b"a": {b"b"}, b"b": {b"c"}, b"c": {b"a", b"d"}, b"d": {b"e"}, b"e": set(),
             b"f": {b"f"}}  # fmt: skip
    comps = sorted(sorted(c) for c in strongly_connected(edges))
    assert comps == [[b"a", b"b", b"c"], [b"f"]]  # the self-loop is a cycle, the chain d-e is not
    assert strongly_connected({b"a": {b"b"}, b"b": {b"c"}}) == []


def test_the_lasso_is_the_shortest_trace_to_the_cycle_and_once_round_it():
    # s -> t -> u -> v -> t (a lap of three), and s -> x -> end
    g = graph_of([("s", 0, BOTH, "t"), ("s", 1, BOTH, "x"), ("x", 0, ZERO, (END, 0)),
                  ("t", 1, BOTH, "u"), ("u", 0, BOTH, "v"), ("v", 1, BOTH, "t")])  # fmt: skip
    progress = dict.fromkeys(identity(g), 0)
    [lasso] = fair_cycles(g, b"s", identity(g), progress)
    assert lasso.prefix == [(0, BOTH)]  # one step to the entry t
    assert [t for t, _ in lasso.lap] == [1, 0, 1] and lasso.states == 3 and lasso.fair


def test_a_step_that_makes_progress_breaks_the_cycle():
    # t -> u -> t with the abstract digest: a lap; the red arm has no progress on it
    g = graph_of([("s", 0, ZERO, "t"), ("t", 0, ZERO, "u"), ("u", 0, ZERO, "t")])
    assert len(fair_cycles(g, b"s", identity(g), dict.fromkeys(identity(g), 0))) == 1
    # the step u -> t2 (t with its counters moved) commits a token: the progress measure
    # grows on that edge, and no lap without progress is left
    lap = graph_of([("s", 0, ZERO, "t"), ("t", 0, ZERO, "u"), ("u", 0, ZERO, "t2")])
    abstract = identity(lap) | {b"t2": b"t"}  # t2 is t with its counters moved
    assert len(fair_cycles(lap, b"s", abstract, dict.fromkeys(abstract, 0))) == 1
    assert fair_cycles(lap, b"s", abstract, {b"s": 0, b"t": 0, b"u": 0, b"t2": 1}) == []


def test_the_abstraction_is_what_closes_a_cycle():
    # the counters make every concrete state new: s0 -> s1 -> s2 -> ... ; the abstract
    # digest maps s1 and s3 (one lap apart) to one state
    g = graph_of([("s0", 0, ZERO, "s1"), ("s1", 0, ZERO, "s2"), ("s2", 0, ZERO, "s3"),
                  ("s3", 0, ZERO, (END, 0))])  # fmt: skip
    progress = dict.fromkeys(identity(g), 0)
    assert fair_cycles(g, b"s0", identity(g), progress) == []  # red: concrete states only
    abstract = identity(g) | {b"s3": b"s1"}
    [lasso] = fair_cycles(g, b"s0", abstract, progress)
    assert len(lasso.prefix) == 1 and [t for t, _ in lasso.lap] == [0, 0]


def test_weak_fairness_rejects_a_lap_that_starves_a_runnable_task():
    assert _fair([(0, BOTH), (1, BOTH)])  # both runnable throughout, both step
    assert not _fair([(0, BOTH), (0, BOTH)])  # task 1 runnable throughout, never runs
    assert _fair([(0, BOTH), (0, ZERO)])  # task 1 not runnable at the second step
    g = graph_of([("s", 0, BOTH, "s")])  # a self-loop of task 0 while task 1 waits to run
    [lasso] = fair_cycles(g, b"s", identity(g), dict.fromkeys(identity(g), 0))
    assert not lasso.fair


def laps_of(*rows: list[tuple[str, int]]) -> list[tuple]:
    return [tuple(r) for r in rows]


def test_a_lap_that_shifts_every_counter_alike_repeats():
    laps = laps_of([("pass", 4), ("pass", 6), ("stamp", 1), ("stamp", 9), ("wire 0>1:0", 2)],
                   [("pass", 7), ("pass", 9), ("stamp", 1), ("stamp", 12), ("wire 0>1:0", 3)],
                   [("pass", 10), ("pass", 12), ("stamp", 1), ("stamp", 15), ("wire 0>1:0", 4)])  # fmt: skip
    shift, why = lap_shift(laps, {3})
    assert why is None and shift == {"pass": [3], "stamp": [0, 3], "wire 0>1:0": [1]}


def test_red_arms_of_the_lap_shift():
    # a counter that speeds up: the lap is not one shift
    _, why = lap_shift(laps_of([("seq", 1)], [("seq", 2)], [("seq", 4)]), set())
    assert why and "same amount" in why
    # pass ids moving apart (a flip counted from a pass that stays put): its timer runs down
    _, why = lap_shift(laps_of([("pass", 5), ("pass", 0)], [("pass", 8), ("pass", 0)],
                               [("pass", 11), ("pass", 0)]), {3})  # fmt: skip
    assert why and "moved apart" in why
    # two passes a lap over three slots: the next lap runs in other slots
    _, why = lap_shift(laps_of([("pass", 4)], [("pass", 6)], [("pass", 8)]), {3})
    assert why and "slot" in why
    # an untouched LRU stamp below one that grows stays below; one above is overtaken
    fine = laps_of([("stamp", 1), ("stamp", 9)], [("stamp", 1), ("stamp", 12)],
                   [("stamp", 1), ("stamp", 15)])  # fmt: skip
    assert lap_shift(fine, set())[1] is None
    crossing = laps_of([("stamp", 20), ("stamp", 9)], [("stamp", 20), ("stamp", 12)],
                       [("stamp", 20), ("stamp", 15)])  # fmt: skip
    _, why = lap_shift(crossing, set())
    assert why and "cross" in why


def test_a_fair_lap_is_built_when_the_shortest_round_starves_a_task():
    # t -0-> t is the shortest round, and task 1, runnable at t, never runs in it; the
    # component also holds t -1-> u -0-> t: the lap takes task 1's step
    g = graph_of([("s", 0, ZERO, "t"), ("t", 0, BOTH, "t"), ("t", 1, BOTH, "u"),
                  ("u", 0, ZERO, "t")])  # fmt: skip
    [lasso] = fair_cycles(g, b"s", identity(g), dict.fromkeys(identity(g), 0))
    assert lasso.fair and 1 in [t for t, _ in lasso.lap]
