"""The protocol designs ppx can run: one module per axis, each design a small class.

`registry.py` is the switch table (schema defaults, validation, recorded choices, counters,
docs); the engine holds a `Protocol` (the chosen designs) and calls their hooks without
comparing switch strings. This package imports nothing of the engine: the config schema and
validation read it before any rank exists.
"""
