"""The inverted indexes and retrieval: one tokenizer, posting lists and IDF, exact top-k with pruning, the
content term, branch preference and detail recall's snippets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.index.retrieval import ScoredHandoff as ScoredHandoff
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
