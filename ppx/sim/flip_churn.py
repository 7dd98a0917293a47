"""The flip interval below which a scenario's flips churn by construction: unbounded flips
(`flip.max_flips=0`), due by the clock (`flip.due=clock`) and voiding the slots in flight
(`flip.inflight=void`), with the continuation carried into PP (`flip.continuation=survive`;
the generator draws clock only where a continuation survives).

A cutover re-queues every resident, so a decoding request re-prefills its prompt and the
tokens it generated: at most prefix + prompt_max + max_new - 1 tokens (`longest`). From the
cutover at pass C:

- TP (one slot, a pass's output at once): a chunk at each of C + 1 .. C + every - 1, the flip
  due at C + every cutting over at once; the prompt still mid-prefill is carried into PP.
- PP: a chunk launched at C + k comes back to rank 0 at C + k + pp - 1, and the flip announced
  at C + every voids every batch in flight, one coming back in that same pass included (the
  chain that carries the flip precedes the output step): only the chunks at C + 1 ..
  C + every - pp commit. A voided final chunk re-queues the request out of the continuations
  (engine.admission.void=requeue), so nothing is carried, the cutover releases its KV, and the
  TP phase restarts it from zero: the same two phases forever, `livelocked` ("N flips and 1
  re-admissions with no token committed").

So 2 * every - pp - 1 chunks must hold `longest`. Measured on the simulator (one request,
max_new=1, random schedule 0, the default decision design): pp=3 chunk 8 every 5 served a
48-token prompt and livelocked at 49 (where drawn scenarios stopped: `48/49`), every 6
at 64/65, chunk 16 at 96/97; pp=2 every 4 and pp=4 every 5 at 40/41. With flip.inflight=drain
or flip.due=drained the chunks in flight commit (or the flip waits) and nothing restarts.
"""

from __future__ import annotations

import math


def void_churn_least(longest: int, chunk: int, pp: int) -> int:
    """The fewest passes between such flips that let a `longest`-token re-prefill commit."""
    chunks = -(-longest // chunk)
    return math.ceil((chunks + pp + 1) / 2)


def clamp_every(
    every: int,
    max_flips: int,
    voids_inflight: bool,
    clock_due: bool,
    longest: int,
    chunk: int,
    pp: int,
) -> int:
    """A drawn flip interval, raised to void_churn_least where the flips churn by
    construction: unbounded (`max_flips` 0), voiding what is in flight, due by the clock."""
    if max_flips or not voids_inflight or not clock_due:
        return every
    return max(every, void_churn_least(longest, chunk, pp))
