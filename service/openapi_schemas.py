"""The parts of the OpenAPI document that the operations share: the body schemas, the error answers with their
headers (`X-RateLimit-*`, `Retry-After`, `WWW-Authenticate`), the auth schemes, and the webhook deliveries
(an OpenAPI 3.1 ``webhooks`` entry per event). service/openapi.py builds the paths from these."""

from __future__ import annotations

from typing import Any

__all__ = [
    "EVENTS",
    "RATE_HEADERS",
    "components",
    "error_response",
    "ok_response",
    "ref",
    "webhooks",
]

EVENTS = ("handoff.ready", "session.ingested", "session.forgotten")

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _header(name: str) -> Schema:
    return {"$ref": f"#/components/headers/{name}"}


RATE_HEADERS = {name: _header(name) for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")}

_STATUS_TEXT = {
    400: ("bad_request", "The request is malformed: a parameter, the body or its encoding; the message names which."),
    401: ("unauthorized", "No API key, or one that is unknown or revoked."),
    403: ("forbidden", "The key's scope is short of what this needs."),
    404: ("not_found", "No such thing in this tenant (or the feature is off on this server)."),
    405: ("method_not_allowed", "Not answered on this address by this method."),
    406: ("not_acceptable", "The Accept header does not name what this answers."),
    409: ("conflict", "It conflicts with what is there (a forgotten session, a tenant that exists)."),
    413: ("payload_too_large", "The body is larger than the limit (after gunzip); `error.limit` says it."),
    415: ("unsupported_media_type", "A Content-Encoding other than gzip, or a media type this does not read."),
    422: ("unprocessable", "Well-formed, but it cannot be used; the message says why."),
    429: ("rate_limited", "Over the key's rate (or over a per-key cap); `Retry-After` says when to come back."),
    500: ("internal", "An internal error; the server log says why."),
    503: ("unavailable", "Busy or its database unreachable for now; `Retry-After` when it knows."),
    501: ("not_implemented", "This server keeps no webhooks (its key store has no database for them)."),
    504: ("timeout", "The request ran past its deadline."),
}


def _plain(description: str, schema: Schema | None = None, **headers: Schema) -> Schema:
    out: Schema = {"description": description}
    if schema is not None:
        out["content"] = {"application/json": {"schema": schema}}
    if headers:
        out["headers"] = headers
    return out


def error_response(status: int, *, keyed: bool, rpc: bool = False) -> Schema:
    """The error answer ``status`` of an operation; ``keyed``: its key is known by then, so the rate headers come;
    ``rpc``: the MCP SDK answers it, as a JSON-RPC error."""
    code, text = _STATUS_TEXT[status]
    headers: dict[str, Schema] = dict(RATE_HEADERS) if keyed and status != 401 else {}
    if status == 401:
        headers["WWW-Authenticate"] = _header("WWW-Authenticate")
    if status in (429, 503):
        headers["Retry-After"] = _header("Retry-After")
    if rpc:
        return _plain(f"{text} (a JSON-RPC error)", ref("JsonRpcError"), **headers)
    return _plain(f"`{code}`: {text}", ref("Error"), **headers)


def ok_response(description: str, schema: Schema | None, *, keyed: bool, media: str = "application/json") -> Schema:
    out: Schema = {"description": description}
    if schema is not None:
        out["content"] = {media: {"schema": schema}}
    if keyed:
        out["headers"] = dict(RATE_HEADERS)
    return out


def _obj(required: list[str], optional: dict[str, Schema] | None = None, **props: Schema) -> Schema:
    return {"type": "object", "required": required, "properties": {**props, **(optional or {})}}


_S: Schema = {"type": "string"}
_INT: Schema = {"type": "integer"}
# Instants in answers are Unix times in seconds (as `macupos serve keys list --json` writes them).
_TIME: Schema = {"type": "number", "description": "Unix time, seconds"}
_MAYBE_TIME: Schema = {"type": ["number", "null"], "description": "Unix time, seconds; null: not (yet)"}
_STRINGS: Schema = {"type": "array", "items": _S}
_EVENT: Schema = {"type": "string", "enum": list(EVENTS)}
_ISSUED_SCOPE: Schema = {"type": "string", "enum": ["read", "write"]}
_SCOPE: Schema = {"type": "string", "enum": ["read", "write", "admin"]}
_KEY_FIELDS = ["id", "scope", "tenant", "label", "created_at"]
_KEY_PROPS: dict[str, Schema] = {
    "id": {"type": "string", "description": "the key's public id (12 hex digits)"},
    "scope": _SCOPE,
    "tenant": _S,
    "label": _S,
    "created_at": _TIME,
}


def _schemas() -> dict[str, Schema]:
    handoff = _obj(
        ["session_id", "date", "headline", "projects", "kind"],
        session_id=_S,
        date=_S,
        headline=_S,
        projects=_STRINGS,
        keywords=_STRINGS,
        substance={"type": "integer", "description": "how much the handoff holds (the memory's own measure)"},
        kind=_S,
        source=_S,
    )
    return {
        "Error": _obj(
            ["error"],
            error={
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "description": "stable: bad_request, unauthorized, rate_limited, …"},
                    "message": {"type": "string", "description": "what was wrong; never a server path or a key"},
                    "limit": {"type": "integer", "description": "413: the byte limit"},
                    "line": {"type": ["integer", "null"], "description": "422 script_error: the script's line"},
                },
                "additionalProperties": True,
            },
        ),
        "JsonRpcError": _obj(
            ["jsonrpc", "error"],
            jsonrpc={"const": "2.0"},
            id={"type": ["string", "integer", "null"]},
            error=_obj(["code", "message"], code=_INT, message=_S),
        ),
        "Health": _obj(["status"], status={"const": "ok"}),
        "RegisterRequest": _obj(
            [], tenant={"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,62}$", "description": "else one is made"}
        ),
        "Registered": _obj(
            ["api_key", "tenant", "key_id", "scope"], api_key=_S, tenant=_S, key_id=_S, scope={"const": "write"}
        ),
        "TranscriptReport": _obj(
            ["sessions", "problems", "first_problems", "lines_skipped", "counts", "handoffs_extracted", "bytes"],
            sessions={**_STRINGS, "description": "the file's sessions (forgotten ones left out)"},
            problems=_INT,
            first_problems={"type": "array", "items": _obj(["line", "reason"], line=_INT, reason=_S)},
            lines_skipped={"type": "object", "additionalProperties": _INT},
            counts=_obj(["new", "updated", "unchanged"], new=_INT, updated=_INT, unchanged=_INT),
            handoffs_extracted=_INT,
            bytes={**_INT, "description": "the body's size as received"},
        ),
        "HandoffImported": _obj(["session_id", "imported"], session_id=_S, imported=_INT),
        "Handoff": handoff,
        "HandoffPage": _obj(
            ["handoffs", "next_cursor"],
            handoffs={"type": "array", "items": ref("Handoff")},
            next_cursor={"type": ["string", "null"], "description": "pass as `cursor` for the next page"},
        ),
        "GroundingResult": _obj(
            ["session_id", "score", "date", "headline", "projects", "kind"],
            {"branch_preference": {"type": "object"}, "explain": {"type": "object", "description": "explain=1"}},
            session_id=_S,
            score={"type": "number"},
            date=_S,
            headline=_S,
            projects=_STRINGS,
            kind=_S,
        ),
        "SearchHit": _obj(
            ["session_id", "kind", "parent_id", "snippet", "score"],
            session_id=_S,
            kind=_S,
            parent_id={"type": ["string", "null"]},
            snippet=_S,
            score={"type": "number"},
        ),
        "Forgotten": _obj(["forgotten"], forgotten={**_STRINGS, "description": "the session and its subagents"}),
        "ScriptRequest": _obj(["script"], script={**_S, "description": "Tcl"}, as_of={**_S, "format": "date-time"}),
        "ScriptOutput": _obj(["output"], output=_S),
        "Stats": {
            **_obj(["tenant", "facts"], tenant=_S, facts={"type": "object", "additionalProperties": _INT}),
            "additionalProperties": True,
            "description": "the tenant's counts (sessions, handoffs, …) and its facts' counts",
        },
        "FactsTier": _obj(["lines"], lines={**_STRINGS, "maxItems": 12}),
        "NewKeyRequest": _obj(["scope"], scope=_ISSUED_SCOPE, label={"type": "string", "maxLength": 200}),
        "NewKey": _obj(
            ["key", *_KEY_FIELDS], key={**_S, "description": "the key itself: shown this once"}, **_KEY_PROPS
        ),
        "Key": _obj([*_KEY_FIELDS, "revoked_at"], revoked_at=_MAYBE_TIME, **_KEY_PROPS),
        "KeyList": _obj(["keys"], keys={"type": "array", "items": ref("Key")}),
        "NewWebhookRequest": _obj(
            ["url", "events"],
            url={"type": "string", "format": "uri", "description": "https (or http to this machine)"},
            events={"type": "array", "items": _EVENT, "minItems": 1},
        ),
        "NewWebhook": _obj(
            ["id", "secret", "url", "events", "created_at"],
            id=_S,
            secret={**_S, "description": "the HMAC-SHA256 signing secret: shown this once"},
            url=_S,
            events={"type": "array", "items": _EVENT},
            created_at=_TIME,
        ),
        "Webhook": _obj(
            ["id", "url", "events", "created_at"],
            id=_S,
            url=_S,
            events={"type": "array", "items": _EVENT},
            created_at=_TIME,
        ),
        "WebhookList": _obj(["webhooks"], webhooks={"type": "array", "items": ref("Webhook")}),
        "Delivery": _obj(
            ["id", "event", "status", "attempts", "last_status", "created_at", "delivered_at"],
            id=_S,
            event=_EVENT,
            status={"type": "string", "enum": ["pending", "delivered", "failed"]},
            attempts=_INT,
            last_status={"type": ["integer", "null"], "description": "the receiver's last HTTP status"},
            last_error={"type": "string", "description": "why the last try failed ('' when it did not)"},
            created_at=_TIME,
            delivered_at=_MAYBE_TIME,
        ),
        "DeliveryList": _obj(["deliveries"], deliveries={"type": "array", "items": ref("Delivery")}),
        "WebhookEvent": _obj(
            ["id", "event", "created_at", "tenant", "data"],
            id={**_S, "description": "the delivery id (also X-Macupos-Delivery): a receiver drops repeats by it"},
            event=_EVENT,
            created_at=_TIME,
            tenant=_S,
            data={"type": "object", "description": "what happened: the session (and handoff) it is about"},
        ),
    }


def _headers() -> dict[str, Schema]:
    def h(text: str, schema: Schema) -> Schema:
        return {"description": text, "schema": schema}

    number = {"type": "integer", "minimum": 0}
    when = " Sent on every answer to a request whose key is known, while the server limits the rate (by default)."
    return {
        "X-RateLimit-Limit": h("The key's burst: requests it may make at once with a full bucket." + when, number),
        "X-RateLimit-Remaining": h("Requests the key may still make now." + when, number),
        "X-RateLimit-Reset": h("Seconds until the key's bucket is full again (0: full)." + when, number),
        "Retry-After": h("Seconds to wait before trying again.", {"type": "integer", "minimum": 1}),
        "WWW-Authenticate": h('`Bearer realm="macupos"`', {"type": "string"}),
    }


def components() -> dict[str, Any]:
    return {
        "securitySchemes": {
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "`mpk_…`"},
            "bearer": {"type": "http", "scheme": "bearer", "description": "the same key as a bearer token"},
        },
        "schemas": _schemas(),
        "headers": _headers(),
        "responses": {"Error": _plain("An error", ref("Error"))},
    }


def _signature_param(name: str, text: str, schema: Schema) -> Schema:
    return {"name": name, "in": "header", "required": True, "description": text, "schema": schema}


def webhooks() -> dict[str, Any]:
    """One entry per event: the POST the server makes to each registered URL that asked for it."""
    params = [
        _signature_param("X-Macupos-Event", "the event's name, as in the body", _EVENT),
        _signature_param("X-Macupos-Delivery", "the delivery id, as the body's `id`; the same on each retry", _S),
        _signature_param(
            "X-Macupos-Signature-256",
            "`sha256=` and the hex HMAC-SHA256 of the raw body under the webhook's secret; compare it in constant "
            "time before trusting the body",
            {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"},
        ),
    ]
    out: dict[str, Any] = {}
    for event in EVENTS:
        body = {"allOf": [ref("WebhookEvent"), {"properties": {"event": {"const": event}}}]}
        out[event] = {
            "post": {
                "summary": f"The {event} event, delivered to a registered URL",
                "operationId": "on_" + event.replace(".", "_"),
                "parameters": params,
                "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
                "responses": {
                    "2XX": {"description": "received; the delivery is marked delivered"},
                    "default": {"description": "any other answer, or none within the timeout: retried with backoff"},
                },
                "security": [],
            }
        }
    return out
