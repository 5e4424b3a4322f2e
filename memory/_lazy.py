"""Package surfaces that load on first use.

Why: a surface re-exports names from many modules, and importing all of them whenever any one is needed would
make every command (a Claude Code hook among them, which must start fast) pay for the whole memory core.
A package lists its names once; ``TYPE_CHECKING`` imports of the same names give type checkers the real types.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["surface"]


def surface(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: ``names`` maps each public name to the module defining it."""

    def getattr_(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next lookup is a plain attribute
        return value

    def dir_() -> list[str]:
        return sorted({*names, *vars(sys.modules[package])})

    return getattr_, dir_
