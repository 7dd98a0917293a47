"""Deterministic simulation: every rank of a run in one process, one step at a time.

`scheduler.py` advances tasks (rank loops, the frontend) from one blocking operation to the
next under a strategy (`strategy.py`: random, pct; `dfs.py`: bounded dfs with sleep-set
reduction over step footprints and a delay bound); `ppx.engine.transport.sim` models gloo's
wire on top of it; `world.py` runs a whole engine run (the same RankLoop, policies and
channels as a gloo run) and returns the supervisor's outcome; `schedule.py` saves and loads
the choices that make a run replayable. The explorer (`python -m ppx.explore`): `runner.py`
judges one schedule (verdict and oracle), `shard.py` runs a shard of an exploration,
`shrink.py` minimises its failures, `fanout.py` runs shards on local processes or launcher
jobs, `merge.py` merges and writes them, `explore.py` ties them together. `exhaustive.py` /
`exhaustive_run.py`: every interleaving of a bounded scenario (sleep sets, a visited set of
state digests from `fingerprint.py`, shortest traces); `ends.py`: a schedule's end record;
`gallery.py`: the incident gallery, exhaustively.
"""
