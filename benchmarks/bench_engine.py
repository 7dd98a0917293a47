"""Scheduler overhead and boot time (the machine is noisy: arms interleaved, see _method.py).

  python benchmarks/bench_engine.py [--reps 8] [--boot-reps 1]

1. pp=1 decode throughput of the engine against a bare torch greedy loop of the same model,
   kernels and batch (no scheduler, no processes): the median ratio of interleaved rounds
   with its 95 % interval is the scheduler's overhead (target >= 0.9). Both arms prefill the
   whole batch in one pass and then time the decode steps only.
2. boot-to-first-token at pp=3 (`+exp=smoke`): spawn, rendezvous, model build, first prefill.
"""

from __future__ import annotations

import argparse
import random
import time

import _common
import _method
import torch

BATCH, PROMPT, NEW = 8, 16, 96


def bare_greedy_tok_s(seed: int = 0) -> float:
    from ppx.core import ForwardInputs
    from ppx.engine.cache.kv import KVCache
    from ppx.engine.kernels.registry import get_kernels
    from ppx.engine.model.llama import StageModel
    from ppx.engine.shapes import dims_of

    cfg = _common.compose()
    d = dims_of(cfg)
    _method.pin_threads()  # as a rank runs
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
    # one prefill pass for the whole batch, as the bare loop does: the decode span then
    # holds decode passes only
    chunk = f"engine.chunk_size={BATCH * PROMPT}"
    s, run_dir = _common.run(*_common.decode_load(1, BATCH, PROMPT, NEW), chunk)
    assert s["verdict"] == "served", s["reason"]
    return _common.decode_tok_s(run_dir)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=8, help="interleaved rounds (>= 6 for a CI)")
    ap.add_argument("--boot-reps", type=int, default=1)
    args = ap.parse_args()
    _method.print_machine()
    got = _method.interleave({"bare": bare_greedy_tok_s, "engine": engine_tok_s}, args.reps)
    _method.report(
        got, "bare", f"pp=1 decode tokens/s, batch {BATCH}, {NEW} new tokens", target=0.9
    )
    if args.boot_reps:
        print("\nboot to first token at pp=3 (+exp=smoke), seconds from the supervisor's start")
    for i in range(args.boot_reps):
        s, _ = _common.run("+exp=smoke", "pp=3")
        print(f"{i:>4} boot {s['boot_s']:6.2f}  first token {s['first_token_s']:6.2f}")


if __name__ == "__main__":
    main()
