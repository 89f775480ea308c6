"""errors.py draws the error tree: every class yyb defines, under its parent, with its exit code."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import yyb
from yyb import errors
from yyb.errors import YybError

LINE = re.compile(
    r"^(?P<tree>[│├└─ ]*)(?P<name>\w+)\s+exit (?P<code>\d+)  .*?(?:  \[(?P<where>[\w.]+)\])?$"
)


def drawn(doc: str) -> dict[str, tuple[str | None, int, str]]:
    """name -> (parent, exit code, module) as the docstring's tree draws them."""
    body = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    found: dict[str, tuple[str | None, int, str]] = {}
    parents: list[str] = []
    for line in body.splitlines():
        match = LINE.match(line.removeprefix("    "))
        assert match, f"not a line of the tree: {line!r}"
        depth = len(match["tree"]) // 4
        del parents[depth:]
        name = match["name"]
        assert name not in found, f"{name} drawn twice"
        where = f"yyb.{match['where']}" if match["where"] else "yyb.errors"
        found[name] = (parents[-1] if parents else None, int(match["code"]), where)
        parents.append(name)
    return found


def defined() -> dict[str, tuple[str | None, int, str]]:
    """name -> (parent, exit code, module) of every YybError class in yyb, all modules loaded."""
    for module in pkgutil.walk_packages(yyb.__path__, "yyb."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: dict[str, tuple[str | None, int, str]] = {}
    stack: list[type[YybError]] = [YybError]
    while stack:
        cls = stack.pop()
        parent = next((b.__name__ for b in cls.__bases__ if issubclass(b, YybError)), None)
        assert cls.__name__ not in found, f"two error classes named {cls.__name__}"
        found[cls.__name__] = (parent, cls.exit_code, cls.__module__)
        stack.extend(cls.__subclasses__())
    return found


def test_the_drawn_tree_is_the_tree_of_classes():
    tree, classes = drawn(errors.__doc__), defined()
    assert sorted(classes.keys() - tree.keys()) == [], "defined, not drawn"
    assert sorted(tree.keys() - classes.keys()) == [], "drawn, not defined"
    wrong = {name: (tree[name], found) for name, found in classes.items() if tree[name] != found}
    assert wrong == {}, "(drawn, defined) as (parent, exit code, module)"


@pytest.mark.parametrize(
    "doc, problem",
    [
        ("x::\n\n    A  exit 1  a\n    ├── B  exit 2  b\n    └── C  exit 1  c  [m.n]\n", None),
        ("x::\n\n    A  exit 1  a\n    ├── B  exit 2  b\n    │   └── C  exit 1  c\n", "parent"),
        ("x::\n\n    A  exit 1  a\n    ├── B  exit 1  b\n    └── C  exit 1  c  [m.n]\n", "code"),
    ],
)
def test_the_comparison_sees_a_class_misplaced(doc, problem):
    """A class drawn under the wrong parent, or with the wrong exit code, is caught."""
    truth = {"A": (None, 1, "yyb.errors"), "B": ("A", 2, "yyb.errors"), "C": ("A", 1, "yyb.m.n")}
    got = drawn(doc)
    differs = {name for name in truth if got[name] != truth[name]}
    assert differs == (set() if problem is None else {"C"} if problem == "parent" else {"B"})
