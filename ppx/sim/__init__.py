"""Deterministic simulation: every rank of a run in one process, one operation at a time.

`scheduler.py` advances tasks (rank loops, the frontend) one transport operation at a time
under a strategy (`strategy.py`: random, pct, dfs, replay); `ppx.engine.transport.sim` models
gloo's wire on top of it; `world.py` runs a whole engine run (the same RankLoop, policies and
channels as a gloo run) and returns the supervisor's outcome; `schedule.py` saves and loads
the choices that make a run replayable.
"""
