"""Issue 34: the largest class holds <= 15 attributes. Every class in ppx is read with `ast`:
its attributes are the `self.x` its methods assign and its class-level annotated fields (a
dataclass also holds the fields of the ppx dataclasses it inherits)."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 15


@dataclass
class ClassInfo:
    name: str
    path: str
    bases: list[str]
    dataclass: bool
    own: set[str] = field(default_factory=set)


def _self_targets(target: ast.expr) -> list[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _self_targets(t)]
    if isinstance(target, ast.Starred):
        return _self_targets(target.value)
    is_self = isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
    return [target.attr] if is_self and target.value.id == "self" else []


def _assigned_on_self(fn: ast.AST) -> set[str]:
    """`self.x` targets in a method body, not in classes defined inside it."""
    out: set[str] = set()
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ClassDef):
            continue
        if isinstance(node, ast.Assign):
            out.update(n for t in node.targets for n in _self_targets(t))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            out.update(_self_targets(node.target))
        todo.extend(ast.iter_child_nodes(node))
    return out


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        if (isinstance(d, ast.Name) and d.id == "dataclass") or (
            isinstance(d, ast.Attribute) and d.attr == "dataclass"
        ):
            return True
    return False


def class_info(cls: ast.ClassDef, path: str) -> ClassInfo:
    bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases]
    info = ClassInfo(cls.name, path, bases, _is_dataclass(cls))
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            info.own.add(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info.own |= _assigned_on_self(node)
    return info


def classes_in(source: str, path: str) -> list[ClassInfo]:
    tree = ast.parse(source)
    return [class_info(n, path) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def attributes(info: ClassInfo, by_name: dict[str, ClassInfo]) -> set[str]:
    """Its own attributes, and a dataclass's inherited dataclass fields."""
    names = set(info.own)
    if info.dataclass:
        for base in info.bases:
            parent = by_name.get(base)
            if parent is not None and parent.dataclass and parent is not info:
                names |= attributes(parent, by_name)
    return names


def oversized(infos: list[ClassInfo], limit: int = LIMIT) -> list[str]:
    by_name = {i.name: i for i in infos}
    out = []
    for info in infos:
        n = len(attributes(info, by_name))
        if n > limit:
            out.append(f"{info.path}: class {info.name} holds {n} attributes (> {limit})")
    return out


def ppx_classes() -> list[ClassInfo]:
    out: list[ClassInfo] = []
    for d, _, files in os.walk(os.path.join(ROOT, "ppx")):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                with open(path) as fh:
                    out += classes_in(fh.read(), os.path.relpath(path, ROOT))
    return out


def test_no_class_in_ppx_holds_more_than_15_attributes():
    infos = ppx_classes()
    assert len(infos) > 100  # the walk found the package, not an empty tree
    too_big = oversized(infos)
    assert not too_big, "split these classes into typed parts:\n" + "\n".join(too_big)


# the counter itself, red and green, on classes written here

SIXTEEN_FIELDS = "@dataclass\nclass Wide:\n" + "".join(f"    f{i}: int = 0\n" for i in range(16))


def test_sixteen_fields_are_named_with_file_and_count():
    assert oversized(classes_in(SIXTEEN_FIELDS, "x.py")) == [
        "x.py: class Wide holds 16 attributes (> 15)"
    ]
    fifteen = SIXTEEN_FIELDS.replace("    f15: int = 0\n", "")
    assert oversized(classes_in(fifteen, "x.py")) == []


def test_self_assignments_count_once_each_and_nested_classes_apart():
    src = (
        "class Loop:\n"
        "    def __init__(self):\n"
        "        self.a, (self.b, self.c) = 1, (2, 3)\n"
        "        self.a = 4\n"
        "        self.d: int = 5\n"
        "    def step(self):\n"
        "        self.e += 1\n"
        "        other.f = 1\n"
        "        class Inner:\n"
        "            def __init__(self):\n"
        "                self.g = 1\n"
    )
    loop, inner = classes_in(src, "x.py")
    assert (loop.name, loop.own) == ("Loop", {"a", "b", "c", "d", "e"})
    assert (inner.name, inner.own) == ("Inner", {"g"})


def test_a_dataclass_counts_the_fields_it_inherits():
    src = (
        "@dataclass\nclass Base:\n" + "".join(f"    b{i}: int = 0\n" for i in range(10))
        + "@dataclass\nclass Child(Base):\n" + "".join(f"    c{i}: int = 0\n" for i in range(6))
        + "class Plain(Base):\n    x: int = 0\n"
    )  # fmt: skip
    assert oversized(classes_in(src, "x.py")) == ["x.py: class Child holds 16 attributes (> 15)"]
