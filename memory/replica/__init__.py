"""A memory database as a replica: which rows make it up, how a change to them is caught, read and applied
(the PostgreSQL fleet of the memory service builds on this).

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.replica.capture import clear_changes as clear_changes
    from memory.replica.capture import drop_capture as drop_capture
    from memory.replica.capture import get_state as get_state
    from memory.replica.capture import install_capture as install_capture
    from memory.replica.capture import pending_changes as pending_changes
    from memory.replica.capture import set_state as set_state
    from memory.replica.rows import MIRROR_NAMES as MIRROR_NAMES
    from memory.replica.rows import MIRRORS as MIRRORS
    from memory.replica.rows import Key as Key
    from memory.replica.rows import Mirror as Mirror
    from memory.replica.rows import ReplicaStateError as ReplicaStateError
    from memory.replica.rows import Row as Row
    from memory.replica.rows import all_rows as all_rows
    from memory.replica.rows import apply_groups as apply_groups
    from memory.replica.rows import group_of as group_of
    from memory.replica.rows import load_rows as load_rows
    from memory.replica.rows import mirror as mirror
    from memory.replica.rows import optimize_fts as optimize_fts
    from memory.replica.rows import read_groups as read_groups
    from memory.replica.rows import rebuild_chunk_fts as rebuild_chunk_fts
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
