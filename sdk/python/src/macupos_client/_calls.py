"""Every API method as a :class:`~macupos_client._core.Call`: the request and how its answer reads, under
the method's own name, parameters and docstring. The sync and the async client each make their methods of
these (``get = Method(_calls.get)`` in :mod:`~macupos_client._api`), so a method is written once here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx

from macupos_client._core import Call, Pages, Request, json_list, json_object
from macupos_client.models import (
    ApiKey,
    Delivery,
    GroundingResult,
    HandoffPage,
    HandoffSummary,
    HandoffUpload,
    NewApiKey,
    NewWebhook,
    SearchHit,
    Stats,
    TranscriptUpload,
    Webhook,
)

__all__ = [
    "create_key",
    "create_webhook",
    "delete_webhook",
    "export",
    "facts_tier",
    "forget",
    "get",
    "get_text",
    "iter_handoff_pages",
    "iter_handoffs",
    "list_handoffs",
    "list_keys",
    "list_webhooks",
    "request",
    "revoke_key",
    "script",
    "search",
    "session",
    "stats",
    "upload_handoff",
    "upload_transcript",
    "webhook_deliveries",
]

Scope = Literal["read", "write"]
SessionFormat = Literal["markdown", "handoff"]
T = TypeVar("T")


def _session_path(session_id: str) -> str:
    # A subagent's id holds '/': the service's route takes the rest of the path, so '/' stays as it is.
    return "/v1/sessions/" + quote(session_id, safe="/")


def _segment(value: str) -> str:
    return quote(str(value), safe="")


def _one(model: Callable[[dict[str, Any]], T]) -> Callable[[httpx.Response], T]:
    """An answer that is one JSON object, read as ``model``."""
    return lambda r: model(json_object(r))


def _each(model: Callable[[Any], T], key: str | None = None) -> Callable[[httpx.Response], list[T]]:
    """An answer that is a JSON list (its objects), or an object with the list under ``key``: each read as ``model``."""
    if key is None:
        return lambda r: [model(item) for item in json_list(r)]
    return lambda r: [model(item) for item in json_object(r).get(key, [])]


def request(
    method: str,
    path: str,
    *,
    params: Mapping[str, Any] | None = None,
    json: Any = None,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    ok: tuple[int, ...] = (200,),
    read_timeout: float | None = None,
) -> Call[httpx.Response]:
    """Any route: the answer when its status is in ``ok``, else the error it is (retries as above)."""
    sent = Request.of(
        method, path, params=params, json_body=json, content=content, headers=headers, ok=ok, timeout_s=read_timeout
    )
    return Call(sent, lambda r: r)


def upload_transcript(name: str, data: bytes | str, *, compress: bool = True) -> Call[TranscriptUpload]:
    """One Claude Code JSONL or Codex rollout under ``name`` (gzip-compressed on the wire unless
    ``compress=False``); sending the same or a grown file again is idempotent."""
    body = data.encode() if isinstance(data, str) else bytes(data)
    headers = {"Content-Type": "application/x-ndjson"}
    if compress:
        headers["Content-Encoding"] = "gzip"
    request = Request.of(
        "POST", "/v1/transcripts", params={"name": name}, content=body, headers=headers, upload=True, gzip=compress
    )
    return Call(request, _one(TranscriptUpload.of))


def upload_handoff(markdown: str, *, name: str | None = None) -> Call[HandoffUpload]:
    request = Request.of(
        "POST",
        "/v1/handoffs",
        params={"name": name},
        content=markdown.encode(),
        headers={"Content-Type": "text/markdown; charset=utf-8"},
    )
    return Call(request, _one(HandoffUpload.of))


def get(
    query: str = "",
    *,
    project: str | None = None,
    days_back: float | None = None,
    max_results: int | None = None,
    as_of: datetime | None = None,
    branch: str | None = None,
    explain: bool = False,
) -> Call[list[GroundingResult]]:
    """The grounding: the best handoffs for ``query``, best first."""
    params = {
        "q": query,
        "project": project or None,
        "days_back": days_back,
        "max": max_results,
        "as_of": as_of,
        "branch": branch or None,
        "explain": True if explain else None,
    }
    return Call(Request.of("GET", "/v1/get", params=params), _each(GroundingResult.of))


def get_text(
    query: str = "",
    *,
    project: str | None = None,
    days_back: float | None = None,
    max_results: int | None = None,
    as_of: datetime | None = None,
    branch: str | None = None,
) -> Call[str]:
    """The grounding as the quoted text an agent is given."""
    grounding = get(query, project=project, days_back=days_back, max_results=max_results, as_of=as_of, branch=branch)
    params = {**grounding.request.params, "format": "text"}
    return Call(replace(grounding.request, params=params), lambda r: r.text)


def search(query: str, *, limit: int = 10) -> Call[list[SearchHit]]:
    request = Request.of("GET", "/v1/search", params={"q": query, "limit": limit})
    return Call(request, _each(SearchHit.of))


def session(session_id: str, *, format: SessionFormat = "markdown") -> Call[str]:
    """One session's rendered transcript, or (``format="handoff"``) its handoff markdown."""
    return Call(Request.of("GET", _session_path(session_id), params={"format": format}), lambda r: r.text)


def forget(session_id: str) -> Call[list[str]]:
    """Forget a session and its subagents: the ids forgotten."""
    return Call(Request.of("DELETE", _session_path(session_id)), _each(str, "forgotten"))


def script(text: str, *, as_of: datetime | None = None) -> Call[str]:
    """Run a facts script (all or nothing): its output; ScriptError when it fails."""
    body: dict[str, str] = {"script": text}
    if as_of is not None:
        body["as_of"] = as_of.isoformat()
    return Call(Request.of("POST", "/v1/script", json_body=body), lambda r: str(json_object(r).get("output", "")))


def facts_tier(*, as_of: datetime | None = None) -> Call[list[str]]:
    return Call(Request.of("GET", "/v1/facts/tier", params={"as_of": as_of}), _each(str, "lines"))


def export() -> Call[bytes]:
    """The tenant's memory as a gzip tar (handoffs/, facts/)."""
    return Call(Request.of("GET", "/v1/export", upload=True), lambda r: r.content)


def stats() -> Call[Stats]:
    return Call(Request.of("GET", "/v1/stats"), _one(Stats.of))


def list_handoffs(
    *,
    limit: int | None = None,
    project: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    cursor: str | None = None,
) -> Call[HandoffPage]:
    """One page of handoffs, newest first; pass its ``next_cursor`` back for the next."""
    params = {"limit": limit, "project": project or None, "since": since, "until": until, "cursor": cursor or None}
    return Call(Request.of("GET", "/v1/handoffs", params=params), _one(HandoffPage.of))


def iter_handoff_pages(
    *,
    page_size: int | None = None,
    project: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    cursor: str | None = None,
) -> Pages[HandoffPage]:
    """Every page from ``cursor`` (the first page without one) to the last."""

    def page(after: str | None) -> Call[HandoffPage]:
        return list_handoffs(limit=page_size, project=project, since=since, until=until, cursor=after)

    return Pages(page(cursor), lambda last: page(last.next_cursor) if last.next_cursor else None, lambda p: (p,))


def iter_handoffs(
    *,
    page_size: int | None = None,
    project: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Pages[HandoffSummary]:
    """Every handoff, newest first, a page at a time."""
    pages = iter_handoff_pages(page_size=page_size, project=project, since=since, until=until)
    return Pages(pages.first, pages.after, lambda page: page.handoffs)


def create_key(scope: Scope, *, label: str | None = None) -> Call[NewApiKey]:
    body: dict[str, str] = {"scope": scope}
    if label is not None:
        body["label"] = label
    return Call(Request.of("POST", "/v1/keys", json_body=body, ok=(201, 200)), _one(NewApiKey.of))


def list_keys() -> Call[list[ApiKey]]:
    return Call(Request.of("GET", "/v1/keys"), _each(ApiKey.of, "keys"))


def revoke_key(key_id: str) -> Call[None]:
    return Call(Request.of("DELETE", f"/v1/keys/{_segment(key_id)}", ok=(204, 200)), lambda r: None)


def create_webhook(url: str, events: Sequence[str]) -> Call[NewWebhook]:
    body = {"url": url, "events": list(events)}
    return Call(Request.of("POST", "/v1/webhooks", json_body=body, ok=(201, 200)), _one(NewWebhook.of))


def list_webhooks() -> Call[list[Webhook]]:
    return Call(Request.of("GET", "/v1/webhooks"), _each(Webhook.of, "webhooks"))


def delete_webhook(webhook_id: str) -> Call[None]:
    return Call(Request.of("DELETE", f"/v1/webhooks/{_segment(webhook_id)}", ok=(204, 200)), lambda r: None)


def webhook_deliveries(webhook_id: str) -> Call[list[Delivery]]:
    path = f"/v1/webhooks/{_segment(webhook_id)}/deliveries"
    return Call(Request.of("GET", path), _each(Delivery.of, "deliveries"))
