"""An Anthropic Messages API double: a real HTTP server on 127.0.0.1 that the unmodified Claude Code CLI
(through ``claude-agent-sdk``) talks to.

Tests script replies in a queue; every request body is logged so a test can assert on what was sent.
Wire format (the part of the Messages API the CLI uses): ``POST /v1/messages`` (query string ignored), SSE when
``stream`` is true, a plain JSON message otherwise.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.doubles.loopback import ApiDouble, Handler, LoggedRequest

__all__ = [
    "AnthropicDouble",
    "ErrorReply",
    "LoggedRequest",
    "Reply",
    "Responder",
    "ToolUse",
    "auth_error",
    "cli_env",
    "last_user_text",
    "structured_output",
]


@dataclass(frozen=True, slots=True)
class ToolUse:
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""  # generated when empty


@dataclass(frozen=True, slots=True)
class Reply:
    """One model turn: text and tool_use blocks in order. stop_reason defaults by content."""

    blocks: tuple[str | ToolUse, ...]
    stop_reason: str = ""
    input_tokens: int = 10
    output_tokens: int = 5


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An API error, e.g. 529 overloaded_error, answered as Anthropic's JSON error shape."""

    status: int = 500
    error_type: str = "api_error"
    message: str = "scripted failure"


# What the Messages API answers (401) when the login is refused: an expired OAuth token (a Claude
# subscription login) or a bad API key.
_AUTH_MESSAGES = {
    "expired": "OAuth token has expired. Please obtain a new token or refresh your existing token.",
    "invalid_key": "invalid x-api-key",
}


def auth_error(kind: str = "expired") -> ErrorReply:
    """The 401 ``authentication_error`` of a refused login: ``kind`` "expired" (OAuth) or "invalid_key"."""
    return ErrorReply(401, "authentication_error", _AUTH_MESSAGES[kind])


Scripted = Reply | ErrorReply | str | ToolUse
Responder = Callable[[dict[str, Any]], Scripted]


def last_user_text(body: Mapping[str, Any]) -> str:
    """Text of the last ``role: user`` message (Claude Code 2.1.x also puts a ``system`` role in messages)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        parts: list[str] = []
        for block in content or []:
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, str):
                    parts.append(inner)
                else:
                    parts.extend(str(b.get("text", "")) for b in inner or [] if b.get("type") == "text")
        return "\n".join(parts)
    return ""


def structured_output(data: Mapping[str, Any]) -> ToolUse:
    """The reply that answers a query run with ``output_format``: the CLI offers the model a
    ``StructuredOutput`` tool whose input schema is the requested JSON schema, validates the call's input
    against it, and returns that input as ``ResultMessage.structured_output``.
    """
    return ToolUse("StructuredOutput", data)


def cli_env(base_url: str, home: str) -> dict[str, str]:
    """Environment for the bundled Claude Code CLI: talk only to ``base_url``, keep state under ``home``."""
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "dummy",
        "HOME": home,
        "CLAUDE_CONFIG_DIR": f"{home}/.claude",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class AnthropicDouble(ApiDouble):
    """Scripted Messages API. ``enqueue`` replies; when the queue is empty ``default`` answers."""

    def __init__(self, default: Scripted | Responder = "ok") -> None:
        super().__init__()  # requests: POST /v1/messages; other_requests: the rest (count_tokens, ...)
        self.default: Scripted | Responder = default
        self._queue: deque[Scripted | Responder] = deque()
        self._ids = itertools.count(1)

    # -- scripting -------------------------------------------------------------------------------

    def enqueue(self, *replies: Scripted | Responder) -> None:
        self._queue.extend(replies)

    def user_texts(self) -> list[str]:
        return [last_user_text(b) for b in self.bodies]

    # -- handlers --------------------------------------------------------------------------------

    def _model_route(self) -> tuple[str, Handler]:
        return "/v1/messages", self._messages

    def _no_route(self, path: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "not_found_error", "message": f"no route {path}"}}

    def _next(self, body: dict[str, Any]) -> Reply | ErrorReply:
        item = self._queue.popleft() if self._queue else self.default
        if callable(item) and not isinstance(item, (Reply, ErrorReply, ToolUse, str)):
            item = item(body)
        if isinstance(item, str):
            return Reply((item,))
        if isinstance(item, ToolUse):
            return Reply((item,))
        return item

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        logged = await self._log(request)
        self.requests.append(logged)
        body = logged.body if isinstance(logged.body, dict) else {}
        reply = self._next(body)
        if isinstance(reply, ErrorReply):
            request_id = f"req_double_{next(self._ids):06d}"
            return web.json_response(
                {
                    "type": "error",
                    "error": {"type": reply.error_type, "message": reply.message},
                    "request_id": request_id,
                },
                status=reply.status,
                headers={"request-id": request_id},
            )
        message = self._message(reply, str(body.get("model", "claude-double")))
        if not body.get("stream"):
            return web.json_response(message)
        return await self._stream(request, message)

    def _message(self, reply: Reply, model: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for block in reply.blocks:
            if isinstance(block, ToolUse):
                content.append(
                    {
                        "type": "tool_use",
                        "id": block.id or f"toolu_double_{next(self._ids):04d}",
                        "name": block.name,
                        "input": dict(block.input),
                    }
                )
            else:
                content.append({"type": "text", "text": block})
        has_tool = any(c["type"] == "tool_use" for c in content)
        return {
            "id": f"msg_double_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": reply.stop_reason or ("tool_use" if has_tool else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        }

    async def _stream(self, request: web.Request, message: Mapping[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 0}}
        events: list[bytes] = [_sse("message_start", {"type": "message_start", "message": start})]
        for index, block in enumerate(message["content"]):
            events.extend(self._block_events(index, block))
        events.append(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message["usage"]["output_tokens"]},
                },
            )
        )
        events.append(_sse("message_stop", {"type": "message_stop"}))
        try:
            for event in events:
                await response.write(event)
            await response.write_eof()
        except ConnectionError:
            # The CLI may hang up mid-stream (interrupts, timeouts): not the double's failure.
            pass
        return response

    @staticmethod
    def _block_events(index: int, block: Mapping[str, Any]) -> Iterable[bytes]:
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
