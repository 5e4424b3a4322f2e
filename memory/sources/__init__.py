"""Where sessions come from: Claude Code transcripts and Codex rollouts found on disk, read defensively
(clipped and redacted as they are parsed) into `memory.models.Transcript`; worktree folders mapped to their project.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.sources.jsonl import MAX_LINE_BYTES as MAX_LINE_BYTES
    from memory.sources.worktrees import project_root_sql as project_root_sql
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
