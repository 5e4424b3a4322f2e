"""The memory core's front doors: other packages import ``memory`` or one of its subpackages (its surface),
never a module inside, and every surface name loads to what its type stub says."""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMORY = ROOT / "memory"
# Packages held to the surfaces. Tests and benches may reach inside a stage to check or measure it.
CALLERS = ("bot", "relay", "service", "macupos")
SUBPACKAGES = sorted(p.parent.name for p in MEMORY.glob("*/__init__.py"))
SURFACES = ["memory", *(f"memory.{name}" for name in SUBPACKAGES)]


def _reaches_inside(source: str) -> list[str]:
    """Import statements that name a module inside memory rather than a surface."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if alias.name.startswith("memory.")]
            found += [
                f"line {node.lineno}: import {name}" for name in names if name.count(".") > 1 or not _is_pkg(name)
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            if module != "memory" and not module.startswith("memory."):
                continue
            if module != "memory" and (module.count(".") > 1 or not _is_pkg(module)):
                found.append(f"line {node.lineno}: from {module}")
                continue
            # `from memory.storage import rows` names a module through its package: still inside.
            for alias in node.names:
                target = f"{module}.{alias.name}"
                if not _is_pkg(target) and (MEMORY.parent / (target.replace(".", "/") + ".py")).is_file():
                    found.append(f"line {node.lineno}: from {module} import {alias.name}")
    return found


def _is_pkg(dotted: str) -> bool:
    return (ROOT / dotted.replace(".", "/") / "__init__.py").is_file()


def test_other_packages_import_only_memory_and_its_subpackages() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} {hit}"
        for package in CALLERS
        if (ROOT / package).is_dir()
        for path in sorted((ROOT / package).rglob("*.py"))
        for hit in _reaches_inside(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_surface_rule_sees_every_way_of_reaching_inside() -> None:
    source = textwrap.dedent(
        """
        import memory.storage.database
        from memory.storage.database import Database
        from memory.storage import rows
        from memory.errors import StorageError
        from memory import grounding
        from memory import Eywa, replica
        from memory.storage import Database
        import memory.storage
        """
    )
    assert [hit.split(":")[0] for hit in _reaches_inside(source)] == [f"line {n}" for n in (2, 3, 4, 5, 6)]


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_name_loads_and_is_typed_the_same_way(surface: str) -> None:
    package = importlib.import_module(surface)
    tree = ast.parse((ROOT / surface.replace(".", "/") / "__init__.py").read_text(encoding="utf-8"))
    typed = {
        alias.asname or alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memory")
        for alias in node.names
        if alias.asname == alias.name  # the `X as X` re-exports under TYPE_CHECKING
    }
    exported = list(getattr(package, "__all__", []))
    assert sorted(typed) == sorted(exported)
    for name in exported:
        value = getattr(package, name)
        defining = importlib.import_module(typed[name])
        assert value is getattr(defining, name), f"{surface}.{name} is not {typed[name]}.{name}"


def test_only_a_dozen_modules_stay_at_memory_top() -> None:
    top = sorted(p.name for p in MEMORY.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 12, top


# Memory's own tables (memory/storage/migrations.py). The PostgreSQL store (service/pg) is memory's storage
# behind the same facade, so it is the one other place that names them.
_MEMORY_TABLES = (
    "applied_events|chunk_fts|chunks|content|content_rows|content_vocab|facts|facts_fts|forgotten|handoffs|"
    "ledger|meta|postings|postings_v|problems|sessions|sources|term_df"
)
_SQL_ON_MEMORY = re.compile(rf"\b(?:FROM|INTO|UPDATE|JOIN)\s+(?:{_MEMORY_TABLES})\b|\beywa\.db\b")


def _schema_reaches(source: str) -> list[str]:
    return [f"line {n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1) if _SQL_ON_MEMORY.search(line)]


def test_memory_s_schema_stays_inside_memory() -> None:
    """The facade owns its schema: pages, the bot and the relay read memory through named read models."""
    offenders = [
        f"{path.relative_to(ROOT)} {hit}"
        for package in CALLERS
        if (ROOT / package).is_dir()
        for path in sorted((ROOT / package).rglob("*.py"))
        if not path.is_relative_to(ROOT / "service" / "pg")
        for hit in _schema_reaches(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_schema_rule_sees_sql_and_the_database_handle() -> None:
    assert _schema_reaches('sql = "SELECT count(*) FROM handoffs WHERE review = ?"')
    assert _schema_reaches("rows = await eywa.db.read(fn)")
    assert _schema_reaches("INSERT INTO ledger (ts) VALUES (?)")
    assert not _schema_reaches("rows = await eywa.list_sessions(limit=5)")
    assert not _schema_reaches('"SELECT name FROM tenants"')
