"""The OpenAPI 3.1 document served at `/v1/openapi.json`: every route the app serves, its parameters, bodies,
answers and every error status it can give, the auth schemes, the rate headers, and the webhook deliveries.

tests/service/test_openapi_complete.py holds it to the app's routes (each one here, and nothing more) and to
the OpenAPI schema; the shared parts are in service/openapi_schemas.py."""

from __future__ import annotations

from typing import Any

from service.openapi_schemas import EVENTS, components, error_response, ok_response, ref, webhooks
from service.settings import ServiceSettings
from service.tenants import Scope

__all__ = ["openapi_document"]

Schema = dict[str, Any]
Ok = tuple[str, Schema | None] | tuple[str, Schema | None, str]  # (description, schema[, media type])

_JSON_CONTENT = "application/json"
_BYTES: Schema = {"type": "string", "format": "binary"}
_TEXT: Schema = {"type": "string"}


def _q(name: str, kind: str, text: str, *, required: bool = False, **extra: Any) -> Schema:
    return {"name": name, "in": "query", "required": required, "description": text, "schema": {"type": kind, **extra}}


def _path_id(text: str) -> Schema:
    return {"name": "id", "in": "path", "required": True, "description": text, "schema": {"type": "string"}}


_GZIP = {
    "name": "Content-Encoding",
    "in": "header",
    "required": False,
    "description": "gzip: the body is gunzipped as it comes (the limit holds after gunzip)",
    "schema": {"type": "string", "enum": ["gzip", "x-gzip", "identity"]},
}


def _json_body(schema: Schema, *, required: bool = True) -> Schema:
    return {"required": required, "content": {_JSON_CONTENT: {"schema": schema}}}


def _op(
    summary: str,
    op_id: str,
    ok: dict[int, Ok],
    *,
    scope: Scope | None,
    errors: tuple[int, ...] = (),
    rpc_errors: tuple[int, ...] = (),
    params: list[Schema] | None = None,
    body: Schema | None = None,
    deadline: bool = True,
    tag: str = "memory",
) -> Schema:
    """One operation. ``scope``: the key scope it needs (None: no key); an operation with a key can also answer
    401, 429, 500 and 503 (and 403 when it needs more than read, 504 when it runs under the request deadline)."""
    keyed = scope is not None
    statuses = set(errors) | {500}
    if keyed:
        statuses |= {401, 429, 503} | ({403} if scope != "read" else set()) | ({504} if deadline else set())
    responses: Schema = {}
    for status, (description, schema, *media) in ok.items():
        responses[str(status)] = ok_response(
            description, schema, keyed=keyed, media=media[0] if media else _JSON_CONTENT
        )
    for status in sorted(statuses | set(rpc_errors)):
        responses[str(status)] = error_response(status, keyed=keyed, rpc=status in rpc_errors)
    out: Schema = {"summary": summary, "operationId": op_id, "tags": [tag], "parameters": params or []}
    if body is not None:
        out["requestBody"] = body
    out["responses"] = responses
    if keyed:
        out["x-macupos-scope"] = scope
    else:
        out["security"] = []
    return out


def _memory_paths(settings: ServiceSettings) -> dict[str, Schema]:
    limits = settings.limits
    session_id = _path_id("A session id; one that holds '/' (a subagent's) is sent as it is or percent-encoded.")
    return {
        "/v1/transcripts": {
            "post": _op(
                f"Upload one Claude Code JSONL or Codex rollout (at most {limits.transcript_bytes} bytes after "
                "gunzip); the same or a grown file again is idempotent",
                "upload_transcript",
                {200: ("the file's sessions", ref("TranscriptReport"))},
                scope="write",
                errors=(400, 413, 415, 422),
                params=[
                    _q("name", "string", "the file's name (its kind and layout are read from it)", required=True),
                    _GZIP,
                ],
                body={"required": True, "content": {"application/octet-stream": {"schema": _BYTES}}},
            )
        },
        "/v1/handoffs": {
            "post": _op(
                f"Import one eywa-format handoff markdown (at most {limits.handoff_bytes} bytes)",
                "import_handoff",
                {200: ("imported", ref("HandoffImported"))},
                scope="write",
                errors=(400, 409, 413, 415),
                params=[_q("name", "string", "optional file name, `YYYY/MM/DD/<session>.md`"), _GZIP],
                body={"required": True, "content": {"text/markdown": {"schema": _TEXT}}},
            ),
            "get": _op(
                "Handoffs, newest first, paged",
                "list_handoffs",
                {200: ("a page", ref("HandoffPage"))},
                scope="read",
                errors=(400,),
                params=[
                    _q("project", "string", "only handoffs naming this project"),
                    _q("since", "string", "ISO-8601, inclusive", format="date-time"),
                    _q("until", "string", "ISO-8601, exclusive", format="date-time"),
                    _q("limit", "integer", "page size", minimum=1, maximum=limits.handoffs_page_max),
                    _q("cursor", "string", "next_cursor of the previous page"),
                ],
            ),
        },
        "/v1/get": {
            "get": _op(
                "Grounding: the best handoffs (the JSON of `macupos memory get --json`, or with format=text its text)",
                "get",
                {
                    200: (
                        "results, or with format=text the quoted grounding",
                        {"type": "array", "items": ref("GroundingResult")},
                    )
                },
                scope="read",
                errors=(400,),
                params=[
                    _q("q", "string", "the query"),
                    _q("project", "string", "a project (boosts, does not filter)"),
                    _q("days_back", "number", "only the last N days (N > 0)"),
                    _q("max", "integer", "results", minimum=1, maximum=5),
                    _q("as_of", "string", "score as if now were this time", format="date-time"),
                    _q("branch", "string", "a git branch: its sessions' handoffs first (a reordering)"),
                    _q("explain", "boolean", "add each score's parts"),
                    _q("format", "string", "json (default) or text (the quoted grounding)", enum=["json", "text"]),
                ],
            )
        },
        "/v1/search": {
            "get": _op(
                "Detail recall (the JSON of `macupos memory search --json`)",
                "search",
                {200: ("hits", {"type": "array", "items": ref("SearchHit")})},
                scope="read",
                errors=(400,),
                params=[
                    _q("q", "string", "the words", required=True),
                    _q("limit", "integer", "hits", minimum=1, maximum=100),
                ],
            )
        },
        "/v1/sessions/{id}": {
            "get": _op(
                "One session's rendered transcript or its handoff",
                "get_session",
                {200: ("markdown", _TEXT, "text/markdown")},
                scope="read",
                errors=(400, 404),
                params=[session_id, _q("format", "string", "markdown or handoff", enum=["markdown", "handoff"])],
            ),
            "delete": _op(
                "Forget a session and its subagents; later uploads leave them out",
                "forget_session",
                {200: ("the forgotten ids", ref("Forgotten"))},
                scope="write",
                errors=(404,),
                params=[session_id],
            ),
        },
        "/v1/script": {
            "post": _op(
                "Run a facts script (Tcl): all its changes or none",
                "run_script",
                {200: ("its output", ref("ScriptOutput"))},
                scope="write",
                errors=(400, 413, 415, 422),
                body=_json_body(ref("ScriptRequest")),
            )
        },
        "/v1/export": {
            "get": _op(
                "The tenant's handoffs tree, facts snapshot and events log as a gzip tar",
                "export",
                {200: ("archive", _BYTES, "application/gzip")},
                scope="read",
            )
        },
        "/v1/stats": {
            "get": _op("Counts of the tenant's memory", "stats", {200: ("counts", ref("Stats"))}, scope="read")
        },
        "/v1/facts/tier": {
            "get": _op(
                "The facts injection tier (`macupos memory facts show`): at most 12 lines",
                "facts_tier",
                {200: ("the lines", ref("FactsTier"))},
                scope="read",
                errors=(400,),
                params=[_q("as_of", "string", "rank as if now were this time", format="date-time")],
            )
        },
    }


def _tenant_paths() -> dict[str, Schema]:
    """The tenant's keys and webhooks: no memory of it is opened for these."""
    hook_id = _path_id("the webhook's id")
    return {
        "/v1/keys": {
            "post": _op(
                "Issue a read or write key of the caller's tenant (admin keys only); the key is shown this once",
                "create_key",
                {201: ("the new key", ref("NewKey"))},
                scope="admin",
                errors=(400, 413, 415),
                body=_json_body(ref("NewKeyRequest")),
                tag="keys",
            ),
            "get": _op(
                "The tenant's keys, revoked ones too, oldest first (never a key itself)",
                "list_keys",
                {200: ("the keys", ref("KeyList"))},
                scope="admin",
                tag="keys",
            ),
        },
        "/v1/keys/{id}": {
            "delete": _op(
                "Revoke one of the tenant's keys from its next request on (again: 204)",
                "revoke_key",
                {204: ("revoked", None)},
                scope="admin",
                errors=(404,),
                params=[_path_id("the key's public id; another tenant's is answered 404")],
                tag="keys",
            )
        },
        "/v1/webhooks": {
            "post": _op(
                f"Register a URL (at most 20 a tenant: 409 past that) for events ({', '.join(EVENTS)}); the signing "
                "secret is shown this once",
                "create_webhook",
                {201: ("the new webhook", ref("NewWebhook"))},
                scope="write",
                errors=(400, 409, 413, 415, 501),
                body=_json_body(ref("NewWebhookRequest")),
                tag="webhooks",
            ),
            "get": _op(
                "The tenant's webhooks (never a secret)",
                "list_webhooks",
                {200: ("the webhooks", ref("WebhookList"))},
                scope="read",
                errors=(501,),
                tag="webhooks",
            ),
        },
        "/v1/webhooks/{id}": {
            "delete": _op(
                "Delete a webhook: nothing more is delivered to it",
                "delete_webhook",
                {204: ("deleted", None)},
                scope="write",
                errors=(404, 501),
                params=[hook_id],
                tag="webhooks",
            )
        },
        "/v1/webhooks/{id}/deliveries": {
            "get": _op(
                "A webhook's delivery log, newest first",
                "list_deliveries",
                {200: ("the deliveries", ref("DeliveryList"))},
                scope="read",
                errors=(400, 404, 501),
                params=[
                    hook_id,
                    _q("limit", "integer", "entries, newest first (100 by default)", minimum=1, maximum=500),
                ],
                tag="webhooks",
            )
        },
    }


def _server_paths() -> dict[str, Schema]:
    mcp = "MCP over streamable HTTP (stateless, JSON answers): eywa_get, eywa_search, eywa_show, eywa_extract, memory"
    return {
        "/healthz": {"get": _op("Liveness", "healthz", {200: ("alive", ref("Health"))}, scope=None, tag="server")},
        "/metrics": {
            "get": _op(
                "Prometheus text: the whole server's counts",
                "metrics",
                {200: ("metrics", _TEXT, "text/plain")},
                scope="admin",
                deadline=False,
                tag="server",
            )
        },
        "/v1/openapi.json": {
            "get": _op(
                "This document",
                "openapi",
                {200: ("OpenAPI 3.1", {"type": "object"})},
                scope="read",
                deadline=False,
                tag="server",
            )
        },
        "/v1/register": {
            "post": _op(
                "Self-service: a new tenant and a write key (off unless --allow-register; rate limited per address)",
                "register",
                {201: ("the key, shown once", ref("Registered"))},
                scope=None,
                errors=(400, 404, 409, 413, 415, 429, 503),
                body=_json_body(ref("RegisterRequest"), required=False),
                tag="server",
            )
        },
        "/mcp": {
            "post": _op(
                mcp,
                "mcp_post",
                {200: ("a JSON-RPC response", {"type": "object"}), 202: ("a notification or response, accepted", None)},
                scope="read",
                errors=(413,),
                rpc_errors=(400, 406, 415),
                body=_json_body({"type": "object", "description": "a JSON-RPC request, notification or response"}),
                tag="mcp",
            ),
            "get": _op(
                "An MCP event stream, ended after a while (clients reconnect); a few at once per key (429 past them)",
                "mcp_stream",
                {200: ("server-sent events", _TEXT, "text/event-stream")},
                scope="read",
                rpc_errors=(406,),
                tag="mcp",
            ),
            "delete": _op(
                "Session termination: never supported (stateless), so always 405",
                "mcp_delete",
                {},
                scope="read",
                rpc_errors=(405,),
                tag="mcp",
            ),
        },
    }


def openapi_document(settings: ServiceSettings) -> dict[str, Any]:
    paths = {**_server_paths(), **_memory_paths(settings), **_tenant_paths()}
    # /v1/get answers the quoted grounding as markdown with format=text
    paths["/v1/get"]["get"]["responses"]["200"]["content"]["text/markdown"] = {"schema": _TEXT}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Macupos memory service",
            "version": "1",
            "description": "Eywa memory for many tenants. Every route but /healthz (and /v1/register, when on) needs "
            "an API key: `X-API-Key: KEY` or `Authorization: Bearer KEY`; a key's scope (read < write < admin) is "
            'named by each operation\'s `x-macupos-scope`. Errors are `{"error": {"code", "message"}}`. '
            "Every answer to a request whose key is known carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and "
            "`X-RateLimit-Reset` while the server limits the rate; a 429 says `Retry-After`. Webhook deliveries "
            "are under `webhooks`.",
        },
        "security": [{"apiKey": []}, {"bearer": []}],
        "tags": [{"name": name} for name in ("memory", "keys", "webhooks", "server", "mcp")],
        "components": components(),
        "paths": paths,
        "webhooks": webhooks(),
    }
