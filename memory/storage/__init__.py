"""The SQLite database and what lives beside it: opening and sharing one connection per file per process,
numbered migrations, the rows of sources, sessions and handoffs, the handoffs mirror, crash-safe file
writes, storage faults and recovery.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_project_rules.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.storage.database import SCHEMA_VERSION as SCHEMA_VERSION
    from memory.storage.database import Database as Database
    from memory.storage.faults import sqlite_fault as sqlite_fault
    from memory.storage.files import write_atomic as write_atomic
    from memory.storage.migrations import MIGRATIONS as MIGRATIONS
    from memory.storage.rows import HandoffRow as HandoffRow
    from memory.storage.rows import get_handoff as get_handoff
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(
        __name__,
        {
            "Database": "memory.storage.database",
            "HandoffRow": "memory.storage.rows",
            "MIGRATIONS": "memory.storage.migrations",
            "SCHEMA_VERSION": "memory.storage.database",
            "get_handoff": "memory.storage.rows",
            "sqlite_fault": "memory.storage.faults",
            "write_atomic": "memory.storage.files",
        },
    )

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Database",
    "HandoffRow",
    "get_handoff",
    "sqlite_fault",
    "write_atomic",
]
