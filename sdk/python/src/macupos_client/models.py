"""The service's answers as frozen dataclasses. Each keeps the JSON object it was read from in ``raw``
(out of its repr and comparisons), so a field the service adds later is not lost to a caller."""

from __future__ import annotations

from collections.abc import Callable
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


def _counts(value: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in value.items()}


_NEEDED = object()  # the key must be there: a KeyError without it

# How a field reads the key of its name: the conversion, and what stands in for a missing key.
_READS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "req": (str, _NEEDED),
    "str": (str, ""),
    "main": (str, "main"),  # a session's kind: main unless said
    "blank": (lambda v: str(v or ""), None),  # null reads as "" too
    "opt": (_opt, None),
    "float": (float, _NEEDED),
    "int": (int, 0),
    "int?": (lambda v: int(v) if isinstance(v, int) else None, None),
    "strs": (_strs, None),
    "counts": (_counts, {}),
    "json": (lambda v: v, None),
}


def _read(data: dict[str, Any], spec: str) -> dict[str, Any]:
    """The fields ``spec`` names (``name:how`` a field, how as in _READS) read from ``data``."""
    fields: dict[str, Any] = {}
    for item in spec.split():
        name, _, how = item.partition(":")
        convert, default = _READS[how]
        fields[name] = convert(data[name] if default is _NEEDED else data.get(name, default))
    return fields


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
            **_read(
                data, "sessions:strs counts:counts handoffs_extracted:int bytes:int problems:int lines_skipped:counts"
            ),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class HandoffUpload:
    session_id: str
    imported: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> HandoffUpload:
        return cls(**_read(data, "session_id:req imported:int"), raw=data)


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
            **_read(
                data,
                "session_id:req score:float date:req headline:req projects:strs kind:main branch_preference:json"
                " explain:json",
            ),
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
        return cls(**_read(data, "session_id:req kind:main parent_id:blank snippet:str score:float"), raw=data)


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
            **_read(
                data,
                "session_id:req date:req headline:str projects:strs keywords:strs substance:int kind:main source:str",
            ),
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
        facts = _counts(data.get("facts", {}))
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
        return cls(**_read(data, "id:req scope:req tenant:str label:opt created_at:str revoked_at:opt"), raw=data)


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
        return cls(**_read(data, "id:req key:req scope:req tenant:str label:opt created_at:str"), raw=data)


@dataclass(frozen=True, slots=True)
class Webhook:
    id: str
    url: str
    events: tuple[str, ...]
    created_at: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Webhook:
        return cls(**_read(data, "id:req url:req events:strs created_at:str"), raw=data)


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
        return cls(**_read(data, "id:req secret:req url:str events:strs created_at:str"), raw=data)


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
        return cls(
            **_read(data, "id:req event:str status:str attempts:int last_status:int? created_at:str delivered_at:opt"),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The ``X-RateLimit-*`` headers of the last answer: requests allowed, left, seconds until full again."""

    limit: int
    remaining: int
    reset: float
