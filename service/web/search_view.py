"""What the search page shows besides the results: which of them matched, as rows for an export, and the
scoring formula.

"Matched": the query (or ``project=``, which boosts as if typed) counted for the handoff: a project or
keyword term matched, or its text did (content > 0). Grounding always returns up to k handoffs; when
fewer match, the rest are the most recent (``fallback``, or score 0), and the page lists them apart.

The formula is docs/retrieval.md's "Score" section. docs/ is not installed with the package, so a copy
lives in static/retrieval-score.md (package data); tests/service/web/test_search_page.py fails when the two
differ.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from markupsafe import Markup

from memory.index import ScoredHandoff
from service.web.markdown import render_markdown

__all__ = ["FORMULA", "formula_html", "is_match", "result_row"]

FORMULA = Path(__file__).parent / "static" / "retrieval-score.md"
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d{1,9}[.)]\s|#|```|~~~|\||>)")


def is_match(res: ScoredHandoff) -> bool:
    e = res.explanation
    return not e.fallback and (e.content > 0 or bool(e.matched))


def result_row(rank: int, res: ScoredHandoff) -> dict[str, Any]:
    """One result as the exports write it: the fields the card shows, the explanation's parts flattened."""
    e = res.explanation
    c = e.content_term
    return {
        "rank": rank,
        "matched": is_match(res),
        "session_id": res.session_id,
        "url": "/sessions/" + res.session_id,
        "score": round(res.score, 6),
        "date": res.date,
        "headline": res.headline,
        "kind": str(res.kind),
        "projects": list(res.projects),
        "keywords": list(res.keywords),
        "terms": [f"{m.field}:{m.term}" for m in e.matched],
        "content": round(e.content, 6),
        "recency": round(e.recency, 6),
        "duration_boost": round(e.duration, 6),
        "age_days": round(e.age_days, 3),
        "duration_min": round(e.duration_min, 1),
        "content_words": list(c.words) if c else [],
        "fallback": e.fallback,
    }


def _unwrap(text: str) -> str:
    """Markdown's soft line breaks joined (the page renderer keeps every newline), code blocks as they are."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            out.append(line)
            continue
        joinable = out and out[-1].strip() and not out[-1].lstrip().startswith(("```", "~~~", "#"))
        if not fenced and line.strip() and joinable and not _BLOCK_START.match(line):
            out[-1] = out[-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
    return "\n".join(out)


@functools.cache
def formula_html() -> Markup:
    return render_markdown(_unwrap(FORMULA.read_text(encoding="utf-8")))
