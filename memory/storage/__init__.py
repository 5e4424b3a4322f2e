"""The SQLite database and what lives beside it: opening and sharing one connection per file per process,
numbered migrations, the rows of sources, sessions and handoffs, the cost ledger, the pages' read models,
the handoffs mirror, crash-safe file
writes, storage faults and recovery.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.storage.database import SCHEMA_VERSION as SCHEMA_VERSION
    from memory.storage.database import Database as Database
    from memory.storage.faults import sqlite_fault as sqlite_fault
    from memory.storage.files import write_all as write_all
    from memory.storage.files import write_atomic as write_atomic
    from memory.storage.ledger import SESSION_ENGINES as SESSION_ENGINES
    from memory.storage.ledger import CostEntry as CostEntry
    from memory.storage.ledger import CostRow as CostRow
    from memory.storage.ledger import CostTotal as CostTotal
    from memory.storage.ledger import CostView as CostView
    from memory.storage.ledger import GroupBy as GroupBy
    from memory.storage.migrations import MIGRATIONS as MIGRATIONS
    from memory.storage.rows import HandoffRow as HandoffRow
    from memory.storage.rows import SessionRow as SessionRow
    from memory.storage.rows import SourceRow as SourceRow
    from memory.storage.rows import get_handoff as get_handoff
    from memory.storage.turns import TaskCall as TaskCall
    from memory.storage.turns import Turn as Turn
    from memory.storage.turns import TurnIndex as TurnIndex
    from memory.storage.turns import TurnText as TurnText
    from memory.storage.views import Child as Child
    from memory.storage.views import SessionItem as SessionItem
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
