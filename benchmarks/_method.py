"""The measurement method every ratio benchmark shares (one place, not one per script).

- Arms run interleaved, one of each per round, the order reversed every other round
  (A B, B A, ...; three arms A B C, C B A, ...), so a drift in the machine's load hits every
  arm alike; each round's ratio is taken within that round.
- One untimed warm-up round of every arm comes first (first calls pay for imports and
  allocator growth).
- The figure is the median of the per-round ratios with a distribution-free 95 % interval
  for that median from order statistics (the binomial sign-test interval): with n rounds,
  [r_(k), r_(n+1-k)] for the largest k with P(Bin(n, 1/2) < k) <= 2.5 %. It needs n >= 6;
  each extra pair of rounds moves k inward as n grows.
- Each rank runs one torch thread (rank_main pins it); the in-process arms pin this
  process to one too. The machine's core count and load are printed beside the figures,
  because ranks beyond the core count are a different experiment.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable

import torch


def pin_threads() -> None:
    """One torch thread, as every rank runs."""
    torch.set_num_threads(1)


def machine() -> str:
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"machine: {cores} cores ({usable} usable), load average {load}; 1 torch thread per rank"


def print_machine() -> None:
    print(machine())


def interleave(
    arms: dict[str, Callable[[], float]], reps: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Run every arm once per round, `reps` rounds; odd rounds run the arms in reverse order
    (A B, B A, ...), so a load trend within a round does not always favour the same arm.
    `warmup` untimed rounds come first: the first call of an arm pays for imports, page
    faults and allocator growth (a bare round at 392 tok/s beside 860-880 in the rest)."""
    for i in range(warmup):
        for fn in arms.values():
            fn()
        print(f"  warm-up round {i + 1}/{warmup} (untimed)", flush=True)
    got: dict[str, list[float]] = {name: [] for name in arms}
    for i in range(reps):
        order = list(arms.items())
        for name, fn in order[::-1] if i % 2 else order:
            got[name].append(fn())
        print(
            f"  round {i + 1}/{reps}: "
            + "  ".join(f"{name} {vals[-1]:.1f}" for name, vals in got.items()),
            flush=True,
        )
    return got


def median_ci(xs: list[float], level: float = 0.95) -> tuple[float, float, float, float]:
    """(median, lo, hi, coverage): the order-statistic interval for the median; lo = hi = nan
    when there are too few values for `level`."""
    s, n = sorted(xs), len(xs)
    k, cum = 0, 0.0
    tail = (1 - level) / 2
    while k < n:  # the largest k with P(Bin(n, 1/2) < k+1) <= tail
        nxt = cum + math.comb(n, k) / 2**n
        if nxt > tail:
            break
        cum, k = nxt, k + 1
    med = statistics.median(s)
    if k == 0:
        return med, math.nan, math.nan, 0.0
    return med, s[k - 1], s[n - k], 1 - 2 * cum


def report(
    got: dict[str, list[float]],
    base: str,
    unit: str,
    target: float,
    exclude: float | None = None,
) -> None:
    """Per-round values and ratios to `base`, then the median ratio, its interval and the
    target (printed, never asserted)."""
    others = [a for a in got if a != base]
    n = len(got[base])
    head = f"{'round':>5} " + " ".join(f"{a:>12}" for a in got)
    head += " " + " ".join(f"{a + '/' + base:>22}" for a in others)
    print(f"\n{unit}, {n} interleaved rounds")
    print(head)
    for i in range(n):
        row = f"{i:>5} " + " ".join(f"{got[a][i]:>12.1f}" for a in got)
        row += " " + " ".join(f"{got[a][i] / got[base][i]:>22.3f}" for a in others)
        print(row)
    for a in others:
        ratios = [x / y for x, y in zip(got[a], got[base])]
        med, lo, hi, cov = median_ci(ratios)
        verdict = "met" if med >= target else "NOT met"
        interval = (
            f"{100 * cov:.1f} % interval [{lo:.3f}, {hi:.3f}] (half-width "
            f"{100 * (hi - lo) / 2 / med:.1f} %)"
            if cov
            else "no 95 % interval (fewer than 6 rounds)"
        )
        line = f"{a}/{base}: median {med:.3f}, {interval}; target >= {target} {verdict}"
        if exclude is not None and cov:
            line += f"; interval excludes {exclude}: {'yes' if lo > exclude else 'no'}"
        print(line)
    print(machine())
