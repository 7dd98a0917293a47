"""Exhaustive search: plain (every interleaving), reduced (sleep sets) and cached (sleep sets
and the visited set of state fingerprints) reach the same set of ends -- each end the
digest of every request's tokens, the order of commits, the verdict and reason key
(ppx/sim/ends.py) -- on three small configs, one of them failing in every schedule. Red
arms: an end record of tokens alone cannot tell two commit orders apart; a fingerprint blind
to the tasks' stacks loses ends; a search cut short is `unknown`, not `verified`. The reduced
and the plain cached walk visit one set of state digests (sleep sets cut transitions, not
states); red arms: a digest that carries history (what earlier schedules left in the shared
models, the order of a frame's earlier looks at its locals) splits states, differently in
each walk."""

from __future__ import annotations

import pytest
from explore_helpers import explore_in, explorer_cfg

import ppx.sim.fingerprint as fingerprint
import ppx.sim.fingerprint_forms as forms
from ppx.sim.exhaustive import ExhaustiveWalker, walk_to_the_end
from ppx.sim.runner import Runner, SharedModels

EXHAUSTIVE = ["explore.strategy=exhaustive", "explore.schedules=100000", "explore.shrinker.runs=0"]
DECISION = ["engine/admission=decision", "engine/ordering=decision_first"]
CONFIGS = {
    # served in every schedule, on the idle clock
    "decision_first": ["pp=2", *DECISION, "workload.num_requests=2", "workload.max_new=1",
                       "explore.clock=idle"],
    # a wedge in every schedule (the gallery's blocking_lap red)
    "blocking_lap": ["pp=2", "engine/admission=decision", "engine/ordering=blocking_lap",
                     "workload.num_requests=2", "workload.max_new=1", "explore.clock=idle"],
    # a fault: rank 1's decision offer flaps
    "offer_flap": ["pp=2", *DECISION, "workload.num_requests=2", "workload.max_new=1",
                   "explore.clock=idle", "faults=offer_flap"],
}  # fmt: skip
MODES = {
    "plain": ["explore.reduce=none", "explore.exhaustive.cache=false"],
    "reduced": ["explore.reduce=sleep", "explore.exhaustive.cache=false"],
    "cached": ["explore.reduce=sleep", "explore.exhaustive.cache=true"],
}


def ends(ex) -> set[tuple]:
    df = ex.table
    return set(zip(df["end"], df["verdict"], df["reason_key"], strict=True))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_plain_reduced_and_cached_search_reach_the_same_ends(tmp_path, name):
    got = {m: explore_in(tmp_path / m, *CONFIGS[name], *EXHAUSTIVE, *ov) for m, ov in MODES.items()}
    for ex in got.values():
        assert ex.dfs["exhausted"], ex.dfs
    assert ends(got["plain"]) == ends(got["reduced"]) == ends(got["cached"])
    assert got["cached"].dfs["runs"] + got["cached"].dfs["blocked"] < got["plain"].dfs["runs"]
    verdict = {m: ex.dfs["verdict"] for m, ex in got.items()}
    assert len(set(verdict.values())) == 1, verdict
    if name == "blocking_lap":
        assert verdict["plain"] == "refuted"
        # the shortest trace: no longer than the shortest failing schedule of the plain tree
        plain_min = int(got["plain"].table["steps"].min())
        assert got["cached"].dfs["trace_len"] <= plain_min
        assert all(t["replayed"] for t in got["cached"].dfs["traces"].values())
    else:
        assert verdict["plain"] == "verified"


def test_the_end_record_tells_apart_the_order_of_commits():
    from types import SimpleNamespace

    from ppx.sim.ends import end_record

    def rec(out):
        return SimpleNamespace(outcome="served", output=out)

    driver = SimpleNamespace(records={0: rec([5, 6]), 1: rec([7])})
    a = end_record(driver, [[("tok", 0, 5), ("tok", 1, 7)], [("tok", 0, 6)]], "served: ")
    b = end_record(driver, [[("tok", 1, 7)], [("tok", 0, 5), ("tok", 0, 6)]], "served: ")
    same = end_record(driver, [[("tok", 0, 5), ("tok", 1, 7)], [("tok", 0, 6)]], "served: ")
    assert a == same
    # the same tokens committed in another order: another end (red: a record of tokens only)
    assert a["end_tokens"] == b["end_tokens"] and a["end"] != b["end"]
    assert end_record(driver, [], "wedged: x")["end"] != end_record(driver, [], "served: ")["end"]


def test_a_fingerprint_blind_to_the_stacks_loses_ends(tmp_path, monkeypatch):
    import types

    cfg = [*CONFIGS["decision_first"], *EXHAUSTIVE]
    plain = explore_in(tmp_path / "plain", *cfg, *MODES["plain"])
    whole = explore_in(tmp_path / "whole", *cfg, *MODES["cached"])
    assert ends(whole) == ends(plain)
    # red: the tasks' stacks and wait conditions unread (where each task is, and all it
    # holds, reached from there): states told apart only by them share a digest, a run
    # meets its own digest again (a false cycle) and the search's ends are not the plain ones
    monkeypatch.setattr(fingerprint, "stack_of", lambda frame: [])
    for tp in (types.FunctionType, types.MethodType):
        monkeypatch.setitem(forms._READERS, tp, forms._opaque)
    blind = explore_in(tmp_path / "blind", *cfg, *MODES["cached"])
    assert ends(blind) != ends(plain)
    assert blind.dfs["states"] < whole.dfs["states"]


def test_the_canonical_wire_merges_states_and_keeps_every_end(tmp_path, monkeypatch):
    """The wire's queues sorted by key (empty ones dropped) and a collective's parts by
    rank merge states that differed only in the order two ranks first sent in, and the
    search reaches the plain search's ends with fewer states than pickle's own order."""
    from ppx.engine.transport.sim import SimWire, _Collective

    cfg = [*CONFIGS["decision_first"], *EXHAUSTIVE]
    plain = explore_in(tmp_path / "plain", *cfg, *MODES["plain"])
    canon = explore_in(tmp_path / "canon", *cfg, *MODES["cached"])
    for tp in (SimWire, _Collective):  # by pickle's own: insertion order, empty queues kept
        monkeypatch.setitem(forms._READERS, tp, forms._default)
    raw = explore_in(tmp_path / "raw", *cfg, *MODES["cached"])
    assert ends(canon) == ends(raw) == ends(plain)
    assert canon.dfs["states"] < raw.dfs["states"]


def test_the_canonical_wire_keeps_what_a_rank_can_read():
    """Green: the order keys were made in, and an empty queue, are no state. Red: a queue's
    FIFO order and a message's bytes are (a form that sorted contents would merge them)."""
    import torch

    from ppx.engine.transport.sim import SimWire, _Send

    def wire(*sends):
        w = SimWire(None, 2)
        for key, value in sends:
            w.queues[key].append(_Send(torch.tensor([value])))
        return w

    fp = fingerprint.Fingerprint()
    a, b = (0, 1, 0), (1, 0, 0)
    base = fp.of_object(wire((a, 1), (b, 2)))
    swapped_keys = wire((b, 2), (a, 1))
    swapped_keys.queues[(1, 1, 3)]  # an empty queue, as a receive's lookup leaves one
    assert fp.of_object(swapped_keys) == base
    assert fp.of_object(wire((a, 2), (b, 2))) != base  # another message
    assert fp.of_object(wire((a, 1), (a, 2))) != fp.of_object(wire((a, 2), (a, 1)))  # FIFO


def states_reached(cfg, sleep: bool, inputs=lambda r: r.inputs) -> set[bytes]:
    """The digest of every state the cached walk visits (the walk by hand, as search runs
    it, on a Runner of its own), `inputs` what the fingerprint writes by identity."""
    runner = Runner(cfg)
    walker = ExhaustiveWalker(sleep, True, fingerprint.Fingerprint(inputs(runner)))
    return set(walk_to_the_end(runner, walker).visited)


# one request, two tokens, one flip at pp=2: 90 states, each of both kinds of history below
# splits some of them (a few seconds for the six walks)
ONE_FLIP = ["pp=2", *DECISION, "workload.num_requests=1", "workload.max_new=2", "explore.clock=idle",
            "flip=every_40_passes", "flip.every_passes=2", "flip.max_flips=1"]  # fmt: skip


def test_sleep_sets_cut_transitions_not_states(monkeypatch):
    """Sleep sets prune transitions, never reachable states (Godefroid): the reduced cached
    walk visits exactly the plain cached walk's states, digest for digest. It did not while
    a digest carried history, which the two walks (their schedules in other orders) do not
    share. Red arms, each the digest as main wrote it: (1) the runs' shared stage models and
    KV caches by value (an exact dict never reaches the reader): what an earlier schedule
    left in the pools of a rank that has not reached its plan yet, and which keys earlier
    schedules made; (2) a frame's `f_locals` in its own order: that of the earlier looks."""
    cfg = explorer_cfg(*ONE_FLIP, *EXHAUSTIVE)
    assert states_reached(cfg, sleep=False) == states_reached(cfg, sleep=True)

    def by_value(runner: Runner) -> tuple:
        return tuple(i for i in runner.inputs if i is not runner.models)

    assert states_reached(cfg, False, by_value) != states_reached(cfg, True, by_value)
    monkeypatch.setattr(forms, "locals_of", lambda frame: frame.f_locals)
    assert states_reached(cfg, sleep=False) != states_reached(cfg, sleep=True)


def test_an_opaque_input_pickle_writes_itself_is_refused():
    """Green: the shared models stand by identity, whatever a run leaves in them. Red: a
    plain dict as an opaque input is refused (pickle would write it by value)."""
    from types import SimpleNamespace

    shared = SharedModels()
    fp = fingerprint.Fingerprint((shared,))
    holder = SimpleNamespace(models=shared)
    empty = fp.of_object(holder)
    shared["kv"] = [3, 2, 1]  # what one schedule leaves for the next
    assert fp.of_object(holder) == empty
    with pytest.raises(TypeError, match="plain dict"):
        fingerprint.Fingerprint(({},))


def test_a_search_cut_short_is_unknown_not_verified(tmp_path):
    cut = explore_in(tmp_path / "cut", *CONFIGS["decision_first"], *EXHAUSTIVE[:1],
                     "explore.schedules=1", "explore.reduce=none", "explore.exhaustive.cache=false")  # fmt: skip
    assert not cut.dfs["exhausted"] and cut.dfs["verdict"] == "unknown"
