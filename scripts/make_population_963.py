"""Write experiments/data/prefix_population_963.jsonl: the #963 population (token ids, vocab 256).

Pass 0 admits six requests in one batch: one over prefix A (max_new 1: it puts A in every
rank's tree and leaves) and five pacers over prefix B whose max_new 2..6 make them finish one
decode step apart. Each finish lets one more request in, so the six requests over A (the
population) arrive one every two passes. With `faults.cache_drop.rank=1 faults.cache_drop.after_pass=2` rank 1
has lost A by the time the first of them is offered, while rank 0 still holds it.

    python scripts/make_population_963.py
"""

from __future__ import annotations

import json
import os
import random

OUT = os.path.join(os.path.dirname(__file__), "..", "experiments", "data")


def main() -> None:
    rng = random.Random(963)

    def seq(n: int) -> list[int]:
        return [rng.randrange(1, 256) for _ in range(n)]

    a, b = seq(96), seq(96)
    lines = [{"prompt": a + seq(8), "max_new": 1}]
    lines += [{"prompt": b + seq(8), "max_new": 2 + i} for i in range(5)]
    lines += [{"prompt": a + seq(8), "max_new": 2} for _ in range(6)]
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "prefix_population_963.jsonl"), "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
