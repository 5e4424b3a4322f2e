"""Eywa, the Macupos memory core: transcripts → deterministic markdown → handoffs → indexes → retrieval.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.errors import MEMORY_RECOVER_WAY_OUT as MEMORY_RECOVER_WAY_OUT
    from memory.errors import DatabaseLockedError as DatabaseLockedError
    from memory.errors import HandoffFormatError as HandoffFormatError
    from memory.errors import MemoryStoreError as MemoryStoreError
    from memory.errors import SessionNotFoundError as SessionNotFoundError
    from memory.errors import SettingsError as SettingsError
    from memory.errors import SourceUnreadableError as SourceUnreadableError
    from memory.errors import StorageError as StorageError
    from memory.facade import Eywa as Eywa
    from memory.factory import Facts as Facts
    from memory.factory import Memory as Memory
    from memory.factory import open_facts as open_facts
    from memory.factory import open_memory as open_memory
    from memory.grounding import handoff_blocks as handoff_blocks
    from memory.grounding import quote_recalled as quote_recalled
    from memory.grounding import recalled_block as recalled_block
    from memory.grounding import strip_frontmatter as strip_frontmatter
    from memory.ingest import IngestReport as IngestReport
    from memory.mcp_server import SCOPED_STATE_KEY as SCOPED_STATE_KEY
    from memory.mcp_server import ToolState as ToolState
    from memory.mcp_server import build_server as build_server
    from memory.models import Handoff as Handoff
    from memory.models import SessionKind as SessionKind
    from memory.settings import MemorySettings as MemorySettings
    from memory.settings import config_path as config_path
    from memory.settings import home_from_env as home_from_env
    from memory.settings import read_config_toml as read_config_toml
    from memory.spend import MEMORY_ENGINE as MEMORY_ENGINE
    from memory.spend import day_start as day_start
    from memory.spend import spent_today as spent_today
    from memory.timeutil import parse_iso as parse_iso
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
