"""The OpenAPI 3.1 document served at `/v1/openapi.json`: every route, its parameters, bodies and errors."""

from __future__ import annotations

from typing import Any

from service.settings import ServiceSettings

__all__ = ["openapi_document"]

_ERROR = {"$ref": "#/components/responses/Error"}


def _q(name: str, kind: str, text: str, *, required: bool = False, **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": text, "schema": {"type": kind, **extra}}


def _json_ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _text_ok(description: str, media: str = "text/markdown") -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": {"type": "string"}}}}


def _op(summary: str, responses: dict[str, Any], *, params: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    errors = {code: _ERROR for code in ("400", "401", "403", "413", "429", "504") if code not in responses}
    return {"summary": summary, "parameters": params or [], "responses": {**responses, **errors}, **extra}


def openapi_document(settings: ServiceSettings) -> dict[str, Any]:
    limits = settings.limits
    session_id = {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "A session id; one that holds '/' (a subagent's) is sent as it is or percent-encoded.",
        "schema": {"type": "string"},
    }
    body_bytes = {"type": "string", "format": "binary"}
    list_of_objects = {"type": "array", "items": {"type": "object"}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Macupos memory service",
            "version": "1",
            "description": "Eywa memory for many tenants. Every route but /healthz (and /v1/register, when on) needs "
            "an API key: `X-API-Key: KEY` or `Authorization: Bearer KEY`. Errors are "
            '`{"error": {"code", "message"}}`.',
        },
        "security": [{"apiKey": []}, {"bearer": []}],
        "components": {
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                        }
                    },
                }
            },
            "responses": {
                "Error": {
                    "description": "An error",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
            },
        },
        "paths": {
            "/healthz": {"get": _op("Liveness", {"200": _json_ok("alive", {"type": "object"})}, security=[])},
            "/v1/register": {
                "post": _op(
                    "Self-service: a new tenant and a write key (off unless --allow-register; rate limited)",
                    {"201": _json_ok("the key, shown once", {"type": "object"}), "404": _ERROR, "409": _ERROR},
                    security=[],
                    requestBody={"content": {"application/json": {"schema": {"type": "object"}}}},
                )
            },
            "/v1/transcripts": {
                "post": _op(
                    f"Upload one Claude Code JSONL or Codex rollout (at most {limits.transcript_bytes} bytes after "
                    "gunzip; Content-Encoding: gzip allowed); the same or a grown file again is idempotent",
                    {"200": _json_ok("the file's sessions", {"type": "object"}), "415": _ERROR, "422": _ERROR},
                    params=[
                        _q("name", "string", "the file's name (its kind and layout are read from it)", required=True)
                    ],
                    requestBody={"required": True, "content": {"application/octet-stream": {"schema": body_bytes}}},
                )
            },
            "/v1/handoffs": {
                "post": _op(
                    f"Import one eywa-format handoff markdown (at most {limits.handoff_bytes} bytes)",
                    {"200": _json_ok("imported", {"type": "object"}), "409": _ERROR},
                    params=[_q("name", "string", "optional file name, `YYYY/MM/DD/<session>.md`")],
                    requestBody={"required": True, "content": {"text/markdown": {"schema": {"type": "string"}}}},
                ),
                "get": _op(
                    "Handoffs, newest first, paged",
                    {"200": _json_ok("a page", {"type": "object"})},
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
                    "Grounding: the best handoffs (the JSON of `macupos memory get --json`, or its text)",
                    {"200": _json_ok("results", list_of_objects)},
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
                    {"200": _json_ok("hits", list_of_objects)},
                    params=[
                        _q("q", "string", "the words", required=True),
                        _q("limit", "integer", "hits", minimum=1, maximum=100),
                    ],
                )
            },
            "/v1/sessions/{id}": {
                "get": _op(
                    "One session's rendered transcript or its handoff",
                    {"200": _text_ok("markdown"), "404": _ERROR},
                    params=[session_id, _q("format", "string", "markdown or handoff", enum=["markdown", "handoff"])],
                ),
                "delete": _op(
                    "Forget a session and its subagents; later uploads leave them out",
                    {"200": _json_ok("the forgotten ids", {"type": "object"}), "404": _ERROR},
                    params=[session_id],
                ),
            },
            "/v1/script": {
                "post": _op(
                    "Run a facts script (Tcl): all its changes or none",
                    {"200": _json_ok('{"output": …}', {"type": "object"}), "422": _ERROR},
                    requestBody={
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["script"],
                                    "properties": {"script": {"type": "string"}, "as_of": {"type": "string"}},
                                }
                            }
                        },
                    },
                )
            },
            "/v1/export": {
                "get": _op(
                    "The tenant's handoffs tree, facts snapshot and events log as a gzip tar",
                    {"200": {"description": "archive", "content": {"application/gzip": {"schema": body_bytes}}}},
                )
            },
            "/v1/stats": {"get": _op("Counts of the tenant's memory", {"200": _json_ok("counts", {"type": "object"})})},
            "/v1/facts/tier": {
                "get": _op(
                    "The facts injection tier (`macupos memory facts show`): at most 12 lines",
                    {"200": _json_ok('{"lines": [...]}', {"type": "object"})},
                    params=[_q("as_of", "string", "rank as if now were this time", format="date-time")],
                )
            },
            "/metrics": {"get": _op("Prometheus text (admin keys)", {"200": _text_ok("metrics", "text/plain")})},
            "/mcp": {
                "post": _op(
                    "MCP over streamable HTTP (stateless): eywa_get, eywa_search, eywa_show, eywa_extract, memory",
                    {"200": _json_ok("a JSON-RPC response", {"type": "object"})},
                )
            },
        },
    }
