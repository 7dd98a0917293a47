"""Designs see the engine through typed views (ppx/protocol/views.py), and the type checker
holds the line: a design that reaches for an engine member outside its view fails mypy."""

from __future__ import annotations

import ast
import pathlib
import textwrap

PROTOCOL = pathlib.Path(__file__).resolve().parents[1] / "ppx" / "protocol"
# a parameter of one of these names is an engine object handed to a design
VIEW_OF = {
    "sched": "SchedulerView",
    "cache": "CacheView",
    "ctx": "RankView",
    "follower": "FollowerView",
}


def _unviewed() -> list[str]:
    out = []
    for path in sorted(PROTOCOL.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for arg in node.args.args + node.args.kwonlyargs:
                want = VIEW_OF.get(arg.arg)
                got = ast.unparse(arg.annotation) if arg.annotation is not None else None
                if want is not None and got != want:
                    out.append(f"{path.name}:{node.lineno} {node.name}({arg.arg}: {got})")
    return out


def test_every_engine_object_a_design_receives_is_annotated_with_its_view():
    assert _unviewed() == []


def _mypy(tmp_path, body: str) -> tuple[int, str]:
    from mypy import api  # the dev extra's; CI runs it on ppx/protocol and ppx/engine too

    src = tmp_path / "design_under_test.py"
    src.write_text(
        textwrap.dedent(
            """
            from __future__ import annotations
            from ppx.protocol.views import SchedulerView

            def hook(sched: SchedulerView) -> int:
            """
        )
        + textwrap.indent(textwrap.dedent(body), "    ")
    )
    # the project's mypy settings and cache (CI's own run of mypy warms it): torch's stubs
    # are read once, not per test
    out, err, rc = api.run([str(src)])
    return rc, out + err


def test_a_design_using_its_view_type_checks(tmp_path):
    rc, out = _mypy(tmp_path, "return len(sched.waiting) + sched.num_inflight\n")
    assert rc == 0, out


def test_a_design_reaching_past_its_view_fails_the_type_checker(tmp_path):
    # `inflight` is a real Scheduler attribute, but no design is given it
    rc, out = _mypy(tmp_path, "return len(sched.inflight)\n")
    assert rc == 1 and '"SchedulerView" has no attribute "inflight"' in out, out
