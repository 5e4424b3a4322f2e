"""The service's answers as frozen dataclasses. Each keeps the JSON object it was read from in ``raw``
(out of its repr and comparisons), so a field the service adds later is not lost to a caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ApiKey",
    "Delivery",
    "GroundingResult",
    "HandoffPage",
    "HandoffSummary",
    "HandoffUpload",
    "NewApiKey",
    "NewWebhook",
    "RateLimit",
    "SearchHit",
    "Stats",
    "TranscriptUpload",
    "Webhook",
]


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class TranscriptUpload:
    """``POST /v1/transcripts``: the sessions the file held, and what was skipped reading it."""

    sessions: tuple[str, ...]
    counts: dict[str, int]  # new / updated / unchanged sessions
    handoffs_extracted: int
    bytes: int  # the body's size after gunzip
    problems: int
    lines_skipped: dict[str, int]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> TranscriptUpload:
        return cls(
            sessions=_strs(data.get("sessions")),
            counts={str(k): int(v) for k, v in data.get("counts", {}).items()},
            handoffs_extracted=int(data.get("handoffs_extracted", 0)),
            bytes=int(data.get("bytes", 0)),
            problems=int(data.get("problems", 0)),
            lines_skipped={str(k): int(v) for k, v in data.get("lines_skipped", {}).items()},
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class HandoffUpload:
    session_id: str
    imported: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> HandoffUpload:
        return cls(str(data["session_id"]), int(data.get("imported", 0)), data)


@dataclass(frozen=True, slots=True)
class GroundingResult:
    """One handoff of ``GET /v1/get``, best first. ``explain`` holds the score's parts when asked for."""

    session_id: str
    score: float
    date: str
    headline: str
    projects: tuple[str, ...]
    kind: str
    branch_preference: dict[str, Any] | None = None
    explain: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> GroundingResult:
        return cls(
            session_id=str(data["session_id"]),
            score=float(data["score"]),
            date=str(data["date"]),
            headline=str(data["headline"]),
            projects=_strs(data.get("projects")),
            kind=str(data.get("kind", "main")),
            branch_preference=data.get("branch_preference"),
            explain=data.get("explain"),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One hit of ``GET /v1/search``; ``score`` is higher for better."""

    session_id: str
    kind: str
    parent_id: str
    snippet: str
    score: float
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> SearchHit:
        return cls(
            session_id=str(data["session_id"]),
            kind=str(data.get("kind", "main")),
            parent_id=str(data.get("parent_id") or ""),
            snippet=str(data.get("snippet", "")),
            score=float(data["score"]),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class HandoffSummary:
    """One handoff as ``GET /v1/handoffs`` lists it (its markdown: ``client.session(id, format="handoff")``)."""

    session_id: str
    date: str
    headline: str
    projects: tuple[str, ...]
    keywords: tuple[str, ...]
    substance: int
    kind: str
    source: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> HandoffSummary:
        return cls(
            session_id=str(data["session_id"]),
            date=str(data["date"]),
            headline=str(data.get("headline", "")),
            projects=_strs(data.get("projects")),
            keywords=_strs(data.get("keywords")),
            substance=int(data.get("substance", 0)),
            kind=str(data.get("kind", "main")),
            source=str(data.get("source", "")),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class HandoffPage:
    """One page, newest first; ``next_cursor`` asks for the next (None on the last page)."""

    handoffs: tuple[HandoffSummary, ...]
    next_cursor: str | None

    @classmethod
    def of(cls, data: dict[str, Any]) -> HandoffPage:
        return cls(tuple(HandoffSummary.of(h) for h in data.get("handoffs", [])), _opt(data.get("next_cursor")) or None)


@dataclass(frozen=True, slots=True)
class Stats:
    """``GET /v1/stats``: the tenant, its fact counts, and the memory's counts (``counts``: sessions,
    handoffs, … as the service names them)."""

    tenant: str
    facts: dict[str, int]
    counts: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Stats:
        counts = {k: v for k, v in data.items() if k not in {"tenant", "facts"}}
        facts = {str(k): int(v) for k, v in data.get("facts", {}).items()}
        return cls(str(data.get("tenant", "")), facts, counts, data)


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key as ``GET /v1/keys`` lists it: never the key itself."""

    id: str
    scope: str
    tenant: str
    label: str | None
    created_at: str
    revoked_at: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> ApiKey:
        return cls(
            str(data["id"]),
            str(data["scope"]),
            str(data.get("tenant", "")),
            _opt(data.get("label")),
            str(data.get("created_at", "")),
            _opt(data.get("revoked_at")),
            data,
        )


@dataclass(frozen=True, slots=True)
class NewApiKey:
    """``POST /v1/keys``: ``key`` is shown this once."""

    id: str
    key: str = field(repr=False)
    scope: str
    tenant: str
    label: str | None
    created_at: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> NewApiKey:
        return cls(
            str(data["id"]),
            str(data["key"]),
            str(data["scope"]),
            str(data.get("tenant", "")),
            _opt(data.get("label")),
            str(data.get("created_at", "")),
            data,
        )


@dataclass(frozen=True, slots=True)
class Webhook:
    id: str
    url: str
    events: tuple[str, ...]
    created_at: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Webhook:
        return cls(str(data["id"]), str(data["url"]), _strs(data.get("events")), str(data.get("created_at", "")), data)


@dataclass(frozen=True, slots=True)
class NewWebhook:
    """``POST /v1/webhooks``: ``secret`` (what deliveries are signed with) is shown this once."""

    id: str
    secret: str = field(repr=False)
    url: str
    events: tuple[str, ...]
    created_at: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> NewWebhook:
        return cls(
            str(data["id"]),
            str(data["secret"]),
            str(data.get("url", "")),
            _strs(data.get("events")),
            str(data.get("created_at", "")),
            data,
        )


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of a webhook: ``status`` is pending, delivered or failed."""

    id: str
    event: str
    status: str
    attempts: int
    last_status: int | None
    created_at: str
    delivered_at: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Delivery:
        last = data.get("last_status")
        return cls(
            str(data["id"]),
            str(data.get("event", "")),
            str(data.get("status", "")),
            int(data.get("attempts", 0)),
            int(last) if isinstance(last, int) else None,
            str(data.get("created_at", "")),
            _opt(data.get("delivered_at")),
            data,
        )


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The ``X-RateLimit-*`` headers of the last answer: requests allowed, left, seconds until full again."""

    limit: int
    remaining: int
    reset: float
