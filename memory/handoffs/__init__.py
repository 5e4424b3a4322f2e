"""Handoffs: their markdown-with-frontmatter format, the deterministic and the model-written extraction, the
extraction step of ingest, adopting a tree of handoff files, and the owner's review.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.handoffs.adopt import ImportReport as ImportReport
    from memory.handoffs.extraction import extract_pending as extract_pending
    from memory.handoffs.format import from_markdown as from_markdown
    from memory.handoffs.review import Forgotten as Forgotten
    from memory.handoffs.review import QueueState as QueueState
    from memory.handoffs.review import ReviewError as ReviewError
    from memory.handoffs.review import correct as correct
    from memory.handoffs.review import count_pending as count_pending
    from memory.handoffs.review import forget as forget
    from memory.handoffs.review import forgotten as forgotten
    from memory.handoffs.review import keep as keep
    from memory.handoffs.review import pending as pending
    from memory.handoffs.review import queue_state as queue_state
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
