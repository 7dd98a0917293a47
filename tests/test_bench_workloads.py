"""The serving benchmarks' workloads (vllm bench serve / sglang.bench_serving): vLLM's random
lengths and bursty gamma arrivals, max concurrency, sglang's generated shared prefixes and
ShareGPT files; each against a red arm that would pass without the mechanism."""

from __future__ import annotations

import json
import math
import queue
import statistics

import pytest
from ppx_helpers import assert_refused, compose, on_gloo, run_inproc

from ppx.frontend.arrivals import arrival_times
from ppx.frontend.driver import Driver
from ppx.frontend.make import make_workload
from ppx.frontend.sharegpt import read_sharegpt
from ppx.frontend.text import load_tokenizer

SIM = ["engine.transport=sim", "pp=3"]


def _gaps(seed: int, burstiness: float, n: int = 4000, rate: float = 8.0) -> list[float]:
    t = arrival_times(seed, n, rate, burstiness)
    return [b - a for a, b in zip(t, t[1:])]


def test_burstiness_is_vllms_gamma_rule():
    """Gamma(shape=b, scale=1/(rate*b)): mean gap 1/rate at every b, CV 1/sqrt(b)."""
    for b in (0.25, 0.5, 1.0, 4.0):
        g = _gaps(3, b)
        assert statistics.mean(g) == pytest.approx(1 / 8.0, rel=0.08)
        cv = statistics.pstdev(g) / statistics.mean(g)
        assert cv == pytest.approx(1 / math.sqrt(b), rel=0.1)
    # red arm: the Poisson arrivals ppx had before burstiness are not bursty
    cv_poisson = statistics.pstdev(_gaps(3, 1.0)) / statistics.mean(_gaps(3, 1.0))
    cv_bursty = statistics.pstdev(_gaps(3, 0.25)) / statistics.mean(_gaps(3, 0.25))
    assert cv_bursty > 1.6 * cv_poisson


def test_same_seed_same_arrivals_other_seed_other():
    assert arrival_times(7, 50, 5.0, 0.5) == arrival_times(7, 50, 5.0, 0.5)
    assert arrival_times(7, 50, 5.0, 0.5) != arrival_times(8, 50, 5.0, 0.5)
    assert arrival_times(7, 50, 5.0, 0.5)[0] == 0.0  # the first request at once, as vLLM


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _drive(cfg, until: float, finish_every: float | None = None) -> list[float]:
    """Submission times of a driver on a settable clock (no engine: requests finish when
    the test says so)."""
    clock, in_q = _Clock(), queue.Queue()
    d = Driver(make_workload(cfg), in_q, queue.Queue(), 0.0, clock)
    d.next_arrival = 0.0
    times, step = [], 0.001
    while clock.t < until:
        n0 = d.next_rid
        d.pump()
        times += [clock.t] * (d.next_rid - n0)
        if finish_every and d.active and round(clock.t / step) % round(finish_every / step) == 0:
            d.active -= 1  # one request finishes
        clock.t += step
    return times


def test_driver_submits_at_the_seeded_bursty_arrivals():
    cfg = compose(
        "workload=vllm_random", "workload.bench.burstiness=0.5", "workload.bench.max_concurrency=0"
    )
    want = arrival_times(int(cfg.seed), 32, float(cfg.workload.rate), 0.5)
    got = _drive(cfg, until=want[-1] + 0.01)
    assert len(got) == 32
    assert all(abs(g - w) < 0.0011 for g, w in zip(got, want))
    # red arm: the Poisson stream of the same seed is another schedule
    poisson = arrival_times(int(cfg.seed), 32, float(cfg.workload.rate), 1.0)
    assert any(abs(g - p) > 0.01 for g, p in zip(got, poisson))


def test_max_concurrency_holds_arrivals_back():
    cfg = compose("workload=vllm_random", "workload.rate=1000", "workload.bench.max_concurrency=3")
    assert len(_drive(cfg, until=0.05)) == 3  # nothing finishes: three in flight, no more
    free = _drive(cfg, until=0.05, finish_every=0.01)
    assert 3 < len(free) < 32
    # red arm: without the cap, 1000 req/s submits all 32 within 0.05 s
    cfg = compose("workload=vllm_random", "workload.rate=1000", "workload.bench.max_concurrency=0")
    assert len(_drive(cfg, until=0.2)) == 32


def test_random_lengths_span_vllms_range():
    cfg = compose("workload=vllm_random", "workload.num_requests=400")
    wl = make_workload(cfg)
    reqs = [wl.request(i) for i in range(400)]
    lens = {len(r.prompt) for r in reqs}
    assert min(lens) == 16 and max(lens) == 48  # 32 * (1 -+ 0.5)
    assert {r.max_new for r in reqs} == set(range(6, 19))  # 12 * (1 -+ 0.5)
    same = make_workload(compose("workload=vllm_random", "workload.bench.range_ratio=0"))
    assert {len(same.request(i).prompt) for i in range(50)} == {32}  # red arm: no range


def test_generated_shared_prefix_groups():
    cfg = compose("workload=generated_shared_prefix")
    wl = make_workload(cfg)
    reqs = [wl.request(i) for i in range(32)]
    heads = [tuple(r.prompt[:64]) for r in reqs]
    assert all(len(r.prompt) == 64 + 16 and r.max_new == 8 for r in reqs)
    assert [len({heads[g * 8 + k] for k in range(8)}) for g in range(4)] == [1] * 4
    assert len(set(heads)) == 4  # four groups, four system prompts


def test_knob_refusals():
    assert_refused(
        ["workload=vllm_random", "workload.bench.burstiness=0"], "workload.bench.burstiness=0"
    )
    assert_refused(
        ["workload=vllm_random", "workload.bench.range_ratio=1"], "workload.bench.range_ratio=1"
    )
    assert_refused(["workload=vllm_random", "workload.rate=-1"], "workload.rate=-1")


@pytest.fixture(scope="module")
def tok_file(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["a b c d e f g h hello world"], trainers.WordLevelTrainer())
    path = str(tmp_path_factory.mktemp("tok") / "tokenizer.json")
    tok.save(path)
    return path


def _conv(*turns: str) -> dict:
    who = ("human", "gpt")
    return {"id": "x", "conversations": [{"from": who[i % 2], "value": t} for i, t in enumerate(turns)]}  # fmt: skip


def test_sharegpt_prompts_outputs_skips_and_refusals(tok_file, tmp_path):
    tok = load_tokenizer(tok_file, 64)
    path = str(tmp_path / "sg.json")
    data = [_conv("a b c", "d e f g"), _conv("only one turn"), 7, _conv("a " * 40, "b")]
    json.dump(data, open(path, "w"))
    lines, skipped = read_sharegpt(path, tok, 0, 32)
    assert skipped == 1 and len(lines) == 3
    assert lines[0].prompt == tok.encode("a b c") and lines[0].max_new == 4
    assert lines[1].error == f"{path}[2]: expected an object with a 'conversations' list"
    assert lines[2].error.startswith(f"{path}[3]: prompt of 40 tokens + max_new 1")
    assert read_sharegpt(path, tok, 9, 64)[0][0].max_new == 9  # output_len fixes it


def test_sharegpt_serves_on_sim(tok_file, tmp_path):
    path = str(tmp_path / "sg.json")
    json.dump([_conv("a b c d", "e f g"), _conv("hello world a", "b c"), 3], open(path, "w"))
    s = run_inproc(
        str(tmp_path / "run"), *SIM, "workload=sharegpt", f"workload.path={path}",
        f"model.tokenizer={tok_file}",
    )  # fmt: skip
    assert (s["served"], s["refused"], s["oracle_mismatches"]) == (2, 1, 0)


@pytest.mark.parametrize("transport", ["sim", "gloo"])
def test_vllm_random_bursty_serves_at_pp3(tmp_path, transport):
    over = [
        *SIM,
        "workload=vllm_random",
        "workload.bench.burstiness=0.5",
        "workload.num_requests=12",
    ]
    s = run_inproc(str(tmp_path / transport), *(over if transport == "sim" else on_gloo(over)))
    assert s["verdict"] == "served" and s["served"] == 12 and s["oracle_mismatches"] == 0
