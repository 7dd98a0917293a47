"""Scheduler overhead and boot time, side by side in one run (the machine is noisy).

  python benchmarks/bench_engine.py [--reps 2]

1. pp=1 decode throughput of the engine against a bare torch greedy loop of the same model,
   kernels and batch (no scheduler, no processes): the ratio is the scheduler's overhead
   (aim >= 0.8).
2. boot-to-first-token at pp=3 (`+exp=smoke`): spawn, rendezvous, model build, first prefill.
"""

from __future__ import annotations

import argparse
import random
import time

import _common
import torch

BATCH, PROMPT, NEW = 8, 16, 96


def bare_greedy_tok_s(seed: int = 0) -> float:
    from ppx.config import dims_of
    from ppx.core import ForwardInputs
    from ppx.engine.cache.kv import KVCache
    from ppx.engine.kernels.registry import get_kernels
    from ppx.engine.model.llama import StageModel

    cfg = _common.compose()
    d = dims_of(cfg)
    torch.set_num_threads(1)  # as a rank runs
    model = StageModel(d, seed, 0, d.layers, get_kernels("torch"))
    cache = KVCache(d.layers, 4096, d.kv_heads, d.head_dim, 16, 512)
    rng = random.Random(seed)
    prompts = [[rng.randrange(1, d.vocab) for _ in range(PROMPT)] for _ in range(BATCH)]
    rows = torch.arange(BATCH)
    slots = torch.arange(BATCH * (PROMPT + NEW)).view(BATCH, PROMPT + NEW)
    cache.req_to_token[:BATCH, : PROMPT + NEW] = slots.to(torch.int32)
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    fi = ForwardInputs(
        "prefill",
        t(list(range(PROMPT)) * BATCH),
        t([i * PROMPT for i in range(BATCH + 1)]),
        t([0] * BATCH),
        rows,
        slots[:, :PROMPT].flatten(),
        t([(i + 1) * PROMPT - 1 for i in range(BATCH)]),
        input_ids=t([x for p in prompts for x in p]),
    )
    toks = model.forward(fi, cache.k, cache.v, cache.req_to_token)
    start = time.perf_counter()
    for step in range(NEW - 1):
        pos = PROMPT + step
        fi = ForwardInputs(
            "decode",
            t([pos] * BATCH),
            t(list(range(BATCH + 1))),
            t([pos] * BATCH),
            rows,
            slots[:, pos],
            t(list(range(BATCH))),
            input_ids=toks,
        )
        toks = model.forward(fi, cache.k, cache.v, cache.req_to_token)
    return BATCH * (NEW - 1) / (time.perf_counter() - start)


def engine_tok_s() -> float:
    s, run_dir = _common.run(
        "pp=1",
        "workload=random",
        f"workload.num_requests={BATCH}",
        f"workload.concurrency={BATCH}",
        f"workload.prompt_min={PROMPT}",
        f"workload.prompt_max={PROMPT}",
        f"workload.max_new={NEW}",
    )
    assert s["verdict"] == "served", s["reason"]
    return _common.decode_tok_s(run_dir)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    rows = []
    for _ in range(args.reps):  # interleaved, so drift in machine load hits both arms
        rows.append((engine_tok_s(), bare_greedy_tok_s()))
    print(f"decode throughput, batch {BATCH}, {NEW} new tokens, pp=1 (tokens/s)")
    print(f"{'rep':>4} {'engine':>10} {'bare torch':>11} {'ratio':>7}")
    for i, (e, b) in enumerate(rows):
        print(f"{i:>4} {e:>10.1f} {b:>11.1f} {e / b:>7.2f}")
    e = sum(r[0] for r in rows) / len(rows)
    b = sum(r[1] for r in rows) / len(rows)
    print(f"{'mean':>4} {e:>10.1f} {b:>11.1f} {e / b:>7.2f}   (aim >= 0.80)")
    boots = []
    for _ in range(args.reps):
        s, _ = _common.run("+exp=smoke", "pp=3")
        boots.append((s["boot_s"], s["first_token_s"]))
    print("\nboot to first token at pp=3 (+exp=smoke), seconds from the supervisor's start")
    for i, (boot, first) in enumerate(boots):
        print(f"{i:>4} boot {boot:6.2f}  first token {first:6.2f}")


if __name__ == "__main__":
    main()
