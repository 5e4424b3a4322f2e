"""The memory service's JSON answers as the memory core's own dataclasses (memory.remote.client)."""

from __future__ import annotations

from typing import Any

from memory.handoffs.format import from_markdown
from memory.index.branch_pref import BranchNote
from memory.index.content_term import ContentTerm
from memory.index.retrieval import ContentHit, Explanation, MatchedTerm, ScoredHandoff
from memory.models import SessionKind
from memory.storage import rows as store
from memory.storage.rows import HandoffRow, handoff_ts

__all__ = ["content_hit", "handoff_row", "listed_row", "scored"]


def handoff_row(markdown: str, review: str = "") -> HandoffRow:
    """A stored handoff's row, read back from its markdown (what the service answers for one): the row the
    local store would keep for it."""
    return store.handoff_from_row(store.handoff_row(from_markdown(markdown), markdown=markdown, review=review))


def _explanation(raw: dict[str, Any] | None) -> Explanation:
    if not raw:
        return Explanation((), 0.0, 0.0, 1.0, 0.0, 0.0, 0, True)
    term = raw.get("content_term")
    return Explanation(
        matched=tuple(MatchedTerm(**m) for m in raw.get("matched", [])),
        content=float(raw["content"]),
        recency=float(raw["recency"]),
        duration=float(raw["duration"]),
        age_days=float(raw["age_days"]),
        duration_min=float(raw["duration_min"]),
        n_indexed=int(raw["n_indexed"]),
        fallback=bool(raw["fallback"]),
        content_term=ContentTerm(**{**term, "words": tuple(term["words"])}) if term else None,
    )


def scored(item: dict[str, Any]) -> ScoredHandoff:
    note = item.get("branch_preference")
    return ScoredHandoff(
        session_id=str(item["session_id"]),
        score=float(item["score"]),
        ts=handoff_ts(str(item["date"])),
        date=str(item["date"]),
        headline=str(item["headline"]),
        projects=tuple(item.get("projects", ())),
        keywords=(),
        kind=str(item["kind"]),
        explanation=_explanation(item.get("explain")),
        branch_note=BranchNote(str(note["branch"]), bool(note["same"]), int(note["score_rank"])) if note else None,
    )


def listed_row(item: dict[str, Any]) -> HandoffRow:
    return HandoffRow(
        str(item["session_id"]),
        SessionKind(str(item.get("kind", "main"))),
        "",
        handoff_ts(str(item["date"])),
        str(item["date"]),
        0.0,
        int(item.get("substance", 0)),
        str(item["headline"]),
        tuple(item.get("projects", ())),
        tuple(item.get("keywords", ())),
        "",  # the list carries no markdown: `show` fetches it
        str(item.get("source", "")),
        "",
    )


def content_hit(item: dict[str, Any]) -> ContentHit:
    return ContentHit(
        session_id=str(item["session_id"]),
        kind=str(item["kind"]),
        parent_id=str(item.get("parent_id") or ""),
        snippet=str(item["snippet"]),
        score=float(item["score"]),
    )
