"""Injected faults as plug-ins: hooks the engine calls, never `if`s in the pass.

Each fault is off by default and exists so a check or a design can be seen failing for real.
A fault is one class (wire.py, offer.py, retract.py, tree.py, skews.py, run_level.py) that
owns one section of the `faults` config (ppx/fault_sections.py) and implements only the hook
kinds it acts through (base.py); the registry (registry.py) lists them, one line each; a rank
holds its active faults' hooks chained by kind (rank_faults.py). docs/extending.md has the
recipe for adding one.
"""
