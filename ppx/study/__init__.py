"""Studies: one research question, a sweep of cells, and the outcomes expected of it.

Run one with `python -m ppx.study NAME` (see docs/analysis.md); the pieces are importable
for tests and notebooks: `load_study`, `check_expectations`, `evaluate`.
"""

from __future__ import annotations

from ppx.study.catalog import load_study
from ppx.study.cli import Outcome, evaluate, main, run_study
from ppx.study.expect import Result, check_expectations
from ppx.study.spec import Study, parse_study

__all__ = [
    "Outcome",
    "Result",
    "Study",
    "check_expectations",
    "evaluate",
    "load_study",
    "main",
    "parse_study",
    "run_study",
]
