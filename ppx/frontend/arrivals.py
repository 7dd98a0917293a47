"""When requests arrive: closed loop, Poisson, or vLLM's bursty gamma process.

`vllm bench serve --request-rate R --burstiness B` draws each inter-arrival gap from a gamma
distribution with shape B and scale 1/(R*B): the mean gap stays 1/R whatever B is, B=1 is a
Poisson process, B<1 bunches requests into bursts, B>1 spreads them towards a fixed interval.
ppx draws the same distribution from its own seeded stream, so the same seed gives the same
arrivals (vLLM's numpy stream is not reproduced: the rule is, the draws are ppx's).
"""

from __future__ import annotations

import math
import random


def is_open_loop(rate: float) -> bool:
    """A finite positive rate paces arrivals; 0 or inf is the closed loop (`--request-rate
    inf`: everything at once, held to the concurrency cap)."""
    return 0 < rate < math.inf


def gap(rng: random.Random, rate: float, burstiness: float) -> float:
    """Seconds from one arrival to the next at `rate` requests/s."""
    if burstiness == 1.0:
        # gamma with shape 1 is the exponential: the draw ppx always made, so a run without
        # burstiness keeps the arrivals it had before burstiness existed
        return rng.expovariate(rate)
    return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))


def arrival_times(seed: int, n: int, rate: float, burstiness: float = 1.0) -> list[float]:
    """The first `n` arrival offsets (s) a seeded run would use (the first at 0, as vLLM's)."""
    rng, t, out = random.Random(f"arrivals/{seed}"), 0.0, []
    for _ in range(n):
        out.append(t)
        t += gap(rng, rate, burstiness)
    return out
