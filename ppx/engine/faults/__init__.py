"""Injected faults: wrappers around the wire and rank 0's match, never `if`s in the pass.

Each is off by default and exists so a check or a design can be seen failing for real:
`channels.py` wraps a rank's channels (a delay on one kind, a lost message, a dropped void
output, a corrupted sampled token); `offer.py` wraps rank 0's radix match (`offer_flap`).
Faults that shape the run rather than a rank's data path live where they act: kills in the
supervisor, pool skew in `shapes`, the LIFO queue scan in the scheduler's constructor, the
epoch miscount in the flip.
"""
