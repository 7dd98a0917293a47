"""docs/extending.md is followed by newcomers word for word: every path it names exists, every
test helper and fixture it tells them to use exists, every module it points a `python -m` at
exists, and it states no count of files or steps (a count went stale twice: the page names
the files instead)."""

from __future__ import annotations

import glob
import importlib.util
import os
import re

import ppx_helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = open(os.path.join(ROOT, "docs", "extending.md")).read()


def _top_conftest():
    """tests/conftest.py itself: `import conftest` may give a subfolder's (tests/analysis,
    tests/kernels) when the whole suite runs."""
    spec = importlib.util.spec_from_file_location(
        "ppx_tests_conftest", os.path.join(ROOT, "tests", "conftest.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPANS = re.findall(r"`([^`\n]+)`", DOC)
PATH = re.compile(r"^(ppx|tests|docs|conf|experiments)/[\w./*-]*$")


def _paths() -> list[str]:
    """Repository paths the page names in code spans (placeholders like `<axis>` skipped)."""
    return sorted({s for s in SPANS if PATH.match(s)})


def test_the_page_names_paths():
    assert "ppx/protocol/registry.py" in _paths()  # the check reads what it should


def test_every_path_the_page_names_exists():
    missing = [p for p in _paths() if not glob.glob(os.path.join(ROOT, p))]
    assert missing == [], missing


def test_every_module_the_page_runs_exists():
    modules = set(re.findall(r"python -m ([\w.]+)", DOC)) - {"pytest", "mypy"}
    assert "ppx.protocol" in modules and "ppx.study" in modules, modules
    for mod in modules:
        path = os.path.join(ROOT, *mod.split("."))
        assert os.path.exists(path + ".py") or os.path.exists(path), mod


def test_every_helper_and_fixture_the_page_names_exists():
    for helper in ("design", "on_gloo", "GLOO_WATCH", "assert_refused"):
        assert f"`{helper}" in DOC or f"{helper}(" in DOC, helper
        assert hasattr(ppx_helpers, helper), helper
    for fixture in ("engine", "ppx_run"):
        assert f"the `{fixture}` fixture" in DOC, fixture
        assert hasattr(_top_conftest(), fixture), fixture


def _counts(text: str) -> list[str]:
    """A recipe's size written as a number ("four files", "the five steps of a design"); the
    ordering vocabulary's "two steps" stands beside the two it lists and is not one."""
    words = r"(?:two|three|four|five|six|seven|eight|\d+)"
    pattern = rf"\b{words} (?:files|edits)\b|\bthe {words} steps of\b"
    return re.findall(pattern, text, flags=re.IGNORECASE)


def test_the_page_states_no_count_of_files_or_steps():
    assert _counts(DOC) == [], _counts(DOC)


def test_the_count_check_sees_the_stale_ones():
    for stale in ("Five files, one of them regenerated", "Then the five steps of a design"):
        assert _counts(stale), stale
