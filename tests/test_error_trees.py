"""Every package's exceptions descend from its root, and its errors module's docstring draws that tree truly:
every exception of the package is on it, under a class it does descend from."""

from __future__ import annotations

import importlib
import inspect
import re
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each package's root, in its errors module.
ROOTS = {"bot": "BotError", "relay": "RelayError", "memory": "MemoryStoreError", "service": "ServiceError"}
# Outside the roots on purpose: another library's kind of error, which its callers (or that library) catch as
# such, or a private signal that never leaves its module.
OUTSIDE = {
    "bot.triggers._Refusal": "private: one request's refusal, answered inside the module",
    "memory.cli.types.StorageFaultExit": "a click.ClickException: click prints it and sets the exit status",
    "memory.facts.api._ScriptFailed": "private: rolls a failed script's transaction back",
    "memory.facts.tclwords.TclSyntaxError": "a ValueError of the snapshot parser, caught by its one caller",
    "memory.handoffs.safe_yaml.StrictYamlError": "a yaml.YAMLError: callers catch PyYAML's errors and ours alike",
    "memory.handoffs.yaml_subset._Unsupported": "private: hands a document to the full YAML parser",
    "service.spool_redact._DuplicateKey": "private: a ValueError json.loads passes through",
    "service.web.initdata.InitDataError": "a ValueError of the Telegram login check, caught by its one caller",
}
_TREE_LINE = re.compile(r"^(?P<indent> +)(?P<name>[A-Za-z_]\w*)(?P<rest>.*)$")
_MODULE_NOTE = re.compile(r"\((?P<module>[a-z_]+(?:\.[a-z_]+)+)")


def _module_names(package: str) -> list[str]:
    """Every module of ``package`` by its file (service/pg has no __init__.py: pkgutil would miss it)."""
    names = []
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@cache
def _exceptions(package: str) -> dict[str, type[BaseException]]:
    """Every exception class defined in ``package``, by ``module.Name``."""
    found: dict[str, type[BaseException]] = {}
    for name in _module_names(package):
        module = importlib.import_module(name)
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return found


def _tree(errors: ModuleType) -> list[tuple[int, type[BaseException]]]:
    """The docstring's tree (the literal block after its ``::`` line) as (indent, class) lines.

    A line names a class of the errors module, or one of the module named in parentheses after it."""
    lines = (errors.__doc__ or "").splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith("::")) + 1
    tree: list[tuple[int, type[BaseException]]] = []
    for line in lines[start:]:
        if not line.strip():
            if tree:
                break
            continue
        match = _TREE_LINE.match(line)
        assert match is not None, f"{errors.__name__}: not a tree line: {line!r}"
        note = _MODULE_NOTE.search(match["rest"])
        home = importlib.import_module(note["module"]) if note else errors
        cls = getattr(home, match["name"], None)
        assert inspect.isclass(cls) and issubclass(cls, BaseException), f"{home.__name__} has no {match['name']}"
        assert cls.__module__ == home.__name__, f"{match['name']} is defined in {cls.__module__}, not {home.__name__}"
        tree.append((len(match["indent"]), cls))
    return tree


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_every_exception_of_a_package_descends_from_its_root(package: str) -> None:
    root = getattr(importlib.import_module(f"{package}.errors"), ROOTS[package])
    found = _exceptions(package)
    stray = sorted(name for name, cls in found.items() if not issubclass(cls, root) and name not in OUTSIDE)
    assert stray == [], f"not under {package}'s {root.__name__}"
    assert sorted(n for n in found if n in OUTSIDE and issubclass(found[n], root)) == []  # stale exceptions
    assert sorted(n for n in OUTSIDE if n.startswith(f"{package}.") and n not in found) == []


def _misdrawn(tree: list[tuple[int, type[BaseException]]]) -> list[str]:
    """The lines of ``tree`` drawn under a class they do not descend from."""
    wrong: list[str] = []
    parents: list[tuple[int, type[BaseException]]] = []
    for indent, cls in tree:
        while parents and parents[-1][0] >= indent:
            parents.pop()
        if parents and not issubclass(cls, parents[-1][1]):
            wrong.append(f"{cls.__name__} under {parents[-1][1].__name__}")
        parents.append((indent, cls))
    return wrong


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_each_errors_docstring_draws_its_package_tree(package: str) -> None:
    errors = importlib.import_module(f"{package}.errors")
    tree = _tree(errors)
    assert tree and tree[0][1] is getattr(errors, ROOTS[package]), "the tree starts at the root"
    assert _misdrawn(tree) == []
    drawn = {cls for _, cls in tree}
    own = [cls for cls in vars(errors).values() if inspect.isclass(cls) and cls.__module__ == errors.__name__]
    assert sorted(c.__name__ for c in own if issubclass(c, BaseException) and c not in drawn) == []
    missing = [name for name, cls in _exceptions(package).items() if name not in OUTSIDE and cls not in drawn]
    assert sorted(missing) == [], "exceptions of the package the tree leaves out"


def test_the_tree_reader_sees_nesting_modules_and_a_wrong_parent() -> None:
    relay_errors = importlib.import_module("relay.errors")
    drawn = ModuleType("relay.errors", "The tree::\n\n    RelayError\n        WorktreeError  (relay.worktrees.git)\n")
    drawn.RelayError = relay_errors.RelayError  # type: ignore[attr-defined]
    tree = _tree(drawn)
    assert [(indent, cls.__name__) for indent, cls in tree] == [(4, "RelayError"), (8, "WorktreeError")]
    upside_down = [(4, tree[1][1]), (8, tree[0][1])]
    assert _misdrawn(upside_down) == ["RelayError under WorktreeError"]


def test_one_session_not_found() -> None:
    """The relay's "no session to resume" is memory's SessionNotFoundError too, and still a relay SessionError."""
    import memory
    from relay.errors import SessionError, SessionNotFoundError

    error = SessionNotFoundError("abc", stderr_tail="no conversation found")
    assert isinstance(error, memory.SessionNotFoundError)
    assert isinstance(error, SessionError)
    assert (str(error), error.session_id, error.stderr_tail) == (
        "Claude Code has no session abc to resume",
        "abc",
        "no conversation found",
    )
