"""The service's answers as frozen dataclasses. Each keeps the JSON object it was read from in ``raw``
(out of its repr and comparisons), so a field the service adds later is not lost to a caller."""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Self, cast

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

_Read = tuple[Callable[[Any], Any], Any]  # the conversion of a key's value, and what stands in for a missing key

# How a field reads the key of its name, by the field's type...
_BY_TYPE: dict[object, _Read] = {
    str: (str, _NEEDED),
    float: (float, _NEEDED),
    int: (int, 0),
    int | None: (lambda v: int(v) if isinstance(v, int) else None, None),
    str | None: (_opt, None),
    tuple[str, ...]: (_strs, None),
    dict[str, int]: (_counts, {}),
    dict[str, Any] | None: (lambda v: v, None),
}

# ... unless its metadata says otherwise: ``field(metadata=_OR_EMPTY)`` for a str the service may leave out.
_OR_EMPTY: dict[str, _Read] = {"read": (str, "")}
_OR_MAIN: dict[str, _Read] = {"read": (str, "main")}  # a session's kind: main unless said
_BLANK: dict[str, _Read] = {"read": (lambda v: str(v or ""), None)}  # null reads as "" too


_Field = tuple[str, Callable[[Any], Any], Any]  # a field's name, conversion and stand-in for a missing key
_FIELDS: dict[type, tuple[_Field, ...]] = {}  # by class, read once: type hints are slow to resolve


def _reads(cls: type) -> tuple[_Field, ...]:
    """How each field of dataclass ``cls`` but ``raw`` is read."""
    if cls not in _FIELDS:
        types = typing.get_type_hints(cls)
        _FIELDS[cls] = tuple(
            (f.name, *f.metadata.get("read", _BY_TYPE[types[f.name]])) for f in fields(cls) if f.name != "raw"
        )
    return _FIELDS[cls]


class _FromJSON:
    """What a model's ``of`` is: each field read from the key of its name, the object itself kept in ``raw``."""

    __slots__ = ()

    @classmethod
    def of(cls, data: dict[str, Any]) -> Self:
        values = {
            name: convert(data[name] if missing is _NEEDED else data.get(name, missing))
            for name, convert, missing in _reads(cls)
        }
        # cls is a dataclass below, whose __init__ takes these: mypy sees only this class's.
        return cast("Callable[..., Self]", cls)(**values, raw=data)


@dataclass(frozen=True, slots=True)
class TranscriptUpload(_FromJSON):
    """``POST /v1/transcripts``: the sessions the file held, and what was skipped reading it."""

    sessions: tuple[str, ...]
    counts: dict[str, int]  # new / updated / unchanged sessions
    handoffs_extracted: int
    bytes: int  # the body's size after gunzip
    problems: int
    lines_skipped: dict[str, int]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class HandoffUpload(_FromJSON):
    session_id: str
    imported: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class GroundingResult(_FromJSON):
    """One handoff of ``GET /v1/get``, best first. ``explain`` holds the score's parts when asked for."""

    session_id: str
    score: float
    date: str
    headline: str
    projects: tuple[str, ...]
    kind: str = field(metadata=_OR_MAIN)
    branch_preference: dict[str, Any] | None = None
    explain: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class SearchHit(_FromJSON):
    """One hit of ``GET /v1/search``; ``score`` is higher for better."""

    session_id: str
    kind: str = field(metadata=_OR_MAIN)
    parent_id: str = field(metadata=_BLANK)
    snippet: str = field(metadata=_OR_EMPTY)
    score: float
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class HandoffSummary(_FromJSON):
    """One handoff as ``GET /v1/handoffs`` lists it (its markdown: ``client.session(id, format="handoff")``)."""

    session_id: str
    date: str
    headline: str = field(metadata=_OR_EMPTY)
    projects: tuple[str, ...]
    keywords: tuple[str, ...]
    substance: int
    kind: str = field(metadata=_OR_MAIN)
    source: str = field(metadata=_OR_EMPTY)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


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
class ApiKey(_FromJSON):
    """A key as ``GET /v1/keys`` lists it: never the key itself."""

    id: str
    scope: str
    tenant: str = field(metadata=_OR_EMPTY)
    label: str | None
    created_at: str = field(metadata=_OR_EMPTY)
    revoked_at: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class NewApiKey(_FromJSON):
    """``POST /v1/keys``: ``key`` is shown this once."""

    id: str
    key: str = field(repr=False)
    scope: str
    tenant: str = field(metadata=_OR_EMPTY)
    label: str | None
    created_at: str = field(metadata=_OR_EMPTY)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Webhook(_FromJSON):
    id: str
    url: str
    events: tuple[str, ...]
    created_at: str = field(metadata=_OR_EMPTY)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class NewWebhook(_FromJSON):
    """``POST /v1/webhooks``: ``secret`` (what deliveries are signed with) is shown this once."""

    id: str
    secret: str = field(repr=False)
    url: str = field(metadata=_OR_EMPTY)
    events: tuple[str, ...]
    created_at: str = field(metadata=_OR_EMPTY)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Delivery(_FromJSON):
    """One delivery of a webhook: ``status`` is pending, delivered or failed."""

    id: str
    event: str = field(metadata=_OR_EMPTY)
    status: str = field(metadata=_OR_EMPTY)
    attempts: int
    last_status: int | None
    created_at: str = field(metadata=_OR_EMPTY)
    delivered_at: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The ``X-RateLimit-*`` headers of the last answer: requests allowed, left, seconds until full again."""

    limit: int
    remaining: int
    reset: float
