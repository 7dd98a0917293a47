"""The import arrows point down: config and the protocol designs know nothing of the engine,
the engine nothing of the launchers, and no two modules import each other (directly or round
a longer loop), counting imports inside functions too -- a lazy import is still an arrow."""

from __future__ import annotations

import ast
import os

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ppx")


def _module(path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(ROOT))[: -len(".py")].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def import_graph(annotations: bool = False) -> dict[str, set[str]]:
    """Module -> the ppx modules it imports; with `annotations`, the imports under
    `if TYPE_CHECKING:` count too (two modules that name each other's types are one
    component in two files, whatever runs first)."""
    mods = {}
    for d, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                mods[_module(os.path.join(d, f))] = os.path.join(d, f)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                if not annotations:
                    node.body = []  # annotations only: no arrow at run time
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import sub` is an arrow to the submodule (every module of a
                # package runs its __init__ first; that is no arrow of its own)
                subs = [f"{node.module}.{a.name}" for a in node.names]
                names = [n for n in subs if n in mods]
                names += [node.module] if len(names) < len(subs) else []
            for n in names:
                if n in mods and n != m:
                    graph[m].add(n)
    return graph


def _reaches(graph, start: str, prefix: str) -> list[str]:
    return sorted(t for t in graph[start] if t == prefix or t.startswith(prefix + "."))


def test_no_arrow_back_up():
    g = import_graph()
    bad = []
    for m in g:
        if m == "ppx.config" or m.startswith("ppx.protocol"):
            bad += [(m, t) for t in _reaches(g, m, "ppx.engine")]
        if m.startswith("ppx.engine"):
            bad += [(m, t) for t in _reaches(g, m, "ppx.launch")]
            bad += [(m, t) for t in _reaches(g, m, "ppx.sim")]  # the simulator drives the engine
        if m.startswith("ppx.protocol"):
            # ppx.header is core data too: the named header fields (it imports only ppx.core)
            bad += [
                (m, t) for t in g[m] if not t.startswith(("ppx.protocol", "ppx.core", "ppx.header"))
            ]
        if m == "ppx.header":
            bad += [(m, t) for t in g[m] if t != "ppx.core"]
    assert bad == []


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return stack[stack.index(t) :] + [t]
            if t not in state and (found := visit(t)):
                return found
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_cycle():
    assert _cycle(import_graph()) is None


def _mutual(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Two modules that import each other (a package and its own submodule aside)."""
    return sorted(
        (a, b)
        for a in graph
        for b in graph[a]
        if a < b and a in graph.get(b, ()) and not b.startswith(a + ".")
    )


def test_no_two_modules_name_each_other_even_for_annotations():
    assert _mutual(import_graph(annotations=True)) == []


def test_the_checks_see_an_arrow_and_a_cycle():
    """Red arms: the checks above are not vacuous on a graph that breaks them."""
    g = {"ppx.config": {"ppx.engine.shapes"}, "ppx.engine.shapes": set()}
    assert _reaches(g, "ppx.config", "ppx.engine") == ["ppx.engine.shapes"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert _mutual({"x.inputs": {"x.scheduler"}, "x.scheduler": {"x.inputs"}}) == [
        ("x.inputs", "x.scheduler")
    ]
    assert _mutual({"x": {"x.sub"}, "x.sub": {"x"}}) == []
