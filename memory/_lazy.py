"""Package surfaces that load on first use.

Why: a surface re-exports names from many modules, and importing all of them whenever any one is needed would
make every command (a Claude Code hook among them, which must start fast) pay for the whole memory core.

A package names its surface once, as ``from module import name as name`` lines under ``if TYPE_CHECKING:``:
type checkers read them as they are, and at run time :func:`surface` reads the same lines from the package's
``__init__.py`` (as scientific Python's lazy_loader reads a stub), so the two can never disagree.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["surface"]


def _typed_names(source: str) -> dict[str, str]:
    """name → defining module, from the ``X as X`` imports under ``if TYPE_CHECKING:``."""
    names: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    names |= {a.name: stmt.module for a in stmt.names if a.asname == a.name}
    return names


def surface(package: str, init_file: str) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (``__all__`` included), read from its ``init_file``."""
    table: dict[str, str] = {}

    def names() -> dict[str, str]:
        if not table:  # read once, on the first name asked for
            table.update(_typed_names(Path(init_file).read_text(encoding="utf-8")))
        return table

    def getattr_(name: str) -> object:
        if name == "__all__":
            value: object = sorted(names())
        elif name in names():
            value = getattr(importlib.import_module(names()[name]), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)  # the next lookup is a plain attribute
        return value

    def dir_() -> list[str]:
        return sorted({*names(), *vars(sys.modules[package])})

    return getattr_, dir_
