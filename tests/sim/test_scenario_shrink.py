"""The greedy scenario shrink (ppx/sim/scenario_shrink.py): requests deleted first, then parts
and fields back to their defaults, a candidate kept only when it fails alike and is smaller."""

from __future__ import annotations

from explore_helpers import planted_search

from ppx.frontend.workloads import kept_source
from ppx.sim.scenario import Batching, Faults, Flips, Load, Pressure, Scenario
from ppx.sim.scenario_shrink import candidates, shrink_scenario, with_requests, without_request

SIX = Scenario(
    Load(num_requests=6, num_prefixes=2, prefix_len=40, max_new=5, concurrency=4),
    Batching(8, 2),
    Pressure(pool_rank=1, pool_tokens=64, host_rank=0, prefetch_ms=50.0),
    Faults(retract_rid=5, delay_kind="chain", delay_rank=1, delay_s=0.02),
    Flips(every=5, max_flips=2, inflight="void", continuation="survive", due="clock"),
)


def _needs_two_on_a_cut_pool(sc: Scenario) -> bool:
    """A bug that takes two requests beside a follower's cut pool, and nothing else."""
    return sc.load.num_requests >= 2 and sc.pressure.pool_rank == 1


def test_requests_are_deleted_first_smallest_first():
    first = [c.load.num_requests for c in list(candidates(SIX))[:5]]
    assert first == [1, 2, 3, 4, 5]
    two = with_requests(SIX, 2)
    # the concurrency and the retracted rid stay within the requests kept
    assert (two.load.concurrency, two.faults.retract_rid) == (2, 1)
    assert all(c.size() < SIX.size() for c in candidates(SIX) if c != SIX)


def test_a_failure_that_needs_two_requests_and_a_cut_pool_shrinks_to_that():
    ran: list[Scenario] = []

    def fails(c: Scenario) -> bool:
        ran.append(c)
        return _needs_two_on_a_cut_pool(c)

    best, runs = shrink_scenario(SIX, fails, lambda: False)
    assert best.load.num_requests == 2 and best.pressure.pool_rank == 1
    assert best.faults == Faults() and best.flips == Flips() and best.batching == Batching()
    assert best.load.max_new == Load().max_new and best.pressure.host_rank == -1
    assert runs == len(ran) and ran[0].load.num_requests == 1  # the cheapest candidate first
    # red arm: a failure that needs all six requests (and everything on) stays as found
    best, _ = shrink_scenario(SIX, lambda c: c == SIX, lambda: False)
    assert best == SIX


def test_the_greedy_shrink_stops_when_its_time_is_spent():
    best, runs = shrink_scenario(SIX, _needs_two_on_a_cut_pool, lambda: True)
    assert (best, runs) == (SIX, 0)


def test_the_search_shrinks_its_find_greedily_before_hypothesis_does():
    """ScenarioSearch.shrink_greedy keeps the smallest candidate that fails with the find's
    key: one that fails otherwise is not the failure being shrunk."""
    # one request fails too, but otherwise
    s = planted_search(SIX, _needs_two_on_a_cut_pool, lambda c: c.load.num_requests == 1)
    s.shrink_greedy()
    assert s.best.scenario.load.num_requests == 2 and s.shrink.greedy_runs > 0
    assert s.best.result.key == s.first.result.key


def test_a_ledger_broken_on_other_slots_is_the_same_failure_a_cycle_elsewhere_is_not():
    from ppx.sim.scenario_shrink import same_failure

    ledger = "mismatch: ledger: rank# # violations, ['slot # both free and tree', 'slot # b']"
    assert same_failure(
        "mismatch: ledger: rank# # violations, ['slot # both tree and tree']", ledger
    )
    # red arms: another verdict, another check, another cycle, the TP phase's livelock
    assert not same_failure("stopped: ledger: rank# # violations, ['slot # x']", ledger)
    oracle = "mismatch: oracle: rid # token #: expected #, got # (margin #)"
    assert same_failure(oracle, ledger)  # one corruption, two detectors
    channel = "mismatch: channel mismatch: rank# expects output seq=# from rank#, which sent"
    assert not same_failure(channel, oracle) and not same_failure(channel, ledger)
    cycle = "wedged: rank0 -[recv output slot=#]-> rank2 -[recv chain]-> rank0"
    assert same_failure(cycle, cycle)
    assert not same_failure(
        "wedged: rank0 -[recv output slot=#]-> rank1 -[recv chain]-> rank0", cycle
    )
    pp = "livelocked: livelock: # voided passes; (rid, told, local) repeating: [(#, #, -#)]"
    tp = "livelocked: livelock: # voided passes (TP phase); (rid, told, local) repeating: [(#, #, #)]"
    assert not same_failure(tp, pp)


def test_a_pool_exhausted_by_the_deleted_requests_is_cut_further_for_fewer():
    """A bug of pool pressure: it fails while the requests' tokens overflow the pool."""

    def overflows(c: Scenario) -> bool:
        return c.pressure.pool_all > 0 and c.load.num_requests * 40 > c.pressure.pool_all

    four = Scenario(Load(num_requests=4, concurrency=4), pressure=Pressure(pool_all=128))
    # red arm: deleting requests alone never fails (3 x 40 fits 128), so it stayed at four
    assert not any(overflows(with_requests(four, k)) for k in (1, 2, 3))
    best, _ = shrink_scenario(four, overflows, lambda: False)
    assert (best.load.num_requests, best.pressure.pool_all) == (2, 64)


def _served(sc: Scenario) -> set[int]:
    """The prompt indices `sc`'s requests serve."""
    rep = max(sc.load.repeat_count, 1)
    return {kept_source(i // rep, sc.load.skip) for i in range(sc.load.num_requests)}


def test_a_request_not_needed_is_deleted_from_the_middle():
    """A bug that needs prompts 0, 2 and 3 of four, 3 retracted: no first-k scenario fails."""

    def needs_0_2_3(c: Scenario) -> bool:
        rid, rep = c.faults.retract_rid, max(c.load.repeat_count, 1)
        return {0, 2, 3} <= _served(c) and kept_source(rid // rep, c.load.skip) == 3

    four = Scenario(Load(num_requests=4, concurrency=4), faults=Faults(retract_rid=3))
    # red arm: the first k requests for k < 4 all lack prompt 3 (the shrink stopped at four)
    assert not any(needs_0_2_3(with_requests(four, k)) for k in (1, 2, 3))
    best, _ = shrink_scenario(four, needs_0_2_3, lambda: False)
    assert best.load.num_requests == 3 and best.load.skip == (1,)
    assert best.faults.retract_rid == 2  # prompt 3 is retracted still, as request 2
    assert best.load.overrides()[-1] == "workload.skip=[1]"
    assert without_request(four, 3) is None  # the retracted request itself is kept


def test_a_deleted_prompt_takes_its_repeats():
    rep = Scenario(Load(num_requests=5, concurrency=2, repeat_count=2))  # prompts 0 0 1 1 2
    one_gone = without_request(rep, 2)
    assert one_gone is not None and one_gone.load.num_requests == 3
    assert one_gone.load.skip == (1,) and _served(one_gone) == {0, 2}
