"""An OpenAI Responses API double: a real HTTP server on 127.0.0.1 that the unmodified Codex CLI (driven by
the ``openai-codex`` SDK through ``codex app-server``) talks to.

Tests script replies in a queue; every request body is logged so a test can assert on the model, the
reasoning effort, the instructions and the history the CLI sent. Wire format (what the Codex CLI uses):
``POST /v1/responses`` with ``stream: true`` answered as SSE ``response.created`` →
(``response.output_item.added`` → ``response.output_text.delta`` →) ``response.output_item.done`` →
``response.completed``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.doubles.loopback import ApiDouble, Handler, LoggedRequest

__all__ = [
    "API_KEY_VAR",
    "PROVIDER",
    "ExecCommand",
    "Garbage",
    "HttpError",
    "LoggedRequest",
    "OpenAIDouble",
    "Responder",
    "Stall",
    "Text",
    "auth_error",
    "codex_env",
    "input_texts",
    "write_codex_config",
]

PROVIDER = "double"
API_KEY_VAR = "MACUPOS_DOUBLE_OPENAI_KEY"


@dataclass(frozen=True, slots=True)
class Text:
    """An assistant message. ``deltas`` also streams it as ``response.output_text.delta`` events."""

    text: str
    deltas: bool = False
    input_tokens: int = 100
    cached_tokens: int = 0
    output_tokens: int = 20
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ExecCommand:
    """A ``function_call`` of Codex's ``exec_command`` tool; the CLI runs ``cmd`` in its sandbox."""

    cmd: str
    call_id: str = ""  # generated when empty
    # Ask to run outside the sandbox (``sandbox_permissions: require_escalated``): under the on-request
    # approval policy this is what makes Codex ask the client for approval.
    escalate: bool = False


@dataclass(frozen=True, slots=True)
class HttpError:
    """An API error in OpenAI's shape; :func:`auth_error` gives the 401 of a refused key."""

    status: int = 500
    message: str = "scripted failure"
    type: str = "server_error"
    code: str | None = None


def auth_error() -> HttpError:
    """What the API answers (401) a key it does not accept (revoked, mistyped, or an expired login's token)."""
    return HttpError(
        401,
        "Incorrect API key provided: sk-doub**********-key. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    )


@dataclass(frozen=True, slots=True)
class Garbage:
    """A 200 answer whose body is not SSE at all."""

    body: bytes = b"\x00\xff garbage, not server-sent events \xfe\n\n"


@dataclass(frozen=True, slots=True)
class Stall:
    """Accept the request and never answer (until the client hangs up or the double stops)."""


Scripted = Text | ExecCommand | HttpError | Garbage | Stall | str
Responder = Callable[[dict[str, Any]], Scripted]


def input_texts(body: Mapping[str, Any]) -> list[str]:
    """Every text of the request's ``input`` items (messages and function-call outputs), in order."""
    texts: list[str] = []
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output":
            output = item.get("output")
            texts.append(output if isinstance(output, str) else json.dumps(output))
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict) and "text" in part)
    return texts


def write_codex_config(codex_home: Path, base_url: str) -> Path:
    """``$CODEX_HOME/config.toml`` that sends every model call to the double and nothing anywhere else."""
    codex_home.mkdir(parents=True, exist_ok=True)
    path = codex_home / "config.toml"
    path.write_text(
        f'model = "gpt-5.1-codex"\n'
        f'model_provider = "{PROVIDER}"\n'
        'approval_policy = "never"\n'
        "check_for_update_on_startup = false\n"
        "\n"
        f"[model_providers.{PROVIDER}]\n"
        'name = "OpenAI double"\n'
        f'base_url = "{base_url}/v1"\n'
        f'env_key = "{API_KEY_VAR}"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        "\n"
        "[analytics]\n"
        "enabled = false\n"
        "\n"
        "[features]\n"
        "plugins = false\n"
        "remote_plugin = false\n"
        "apps = false\n"
        "tool_suggest = false\n"
        "plugin_sharing = false\n",
        encoding="utf-8",
    )
    return path


def codex_env(codex_home: Path, home: Path) -> dict[str, str]:
    """Environment for the Codex CLI: its own CODEX_HOME and HOME, a key for the double, no real OpenAI."""
    return {
        "CODEX_HOME": str(codex_home),
        "HOME": str(home),
        API_KEY_VAR: "double-key",
        "OPENAI_API_KEY": "",
        "OPENAI_BASE_URL": "",
    }


# What the model adds to an exec_command call to run it outside the sandbox.
_ESCALATE = {"sandbox_permissions": "require_escalated", "justification": "needs to write outside the sandbox"}


def _sse(data: Mapping[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


class OpenAIDouble(ApiDouble):
    """Scripted Responses API. ``enqueue`` replies; when the queue is empty ``default`` answers."""

    def __init__(self, default: Scripted | Responder = "ok") -> None:
        super().__init__()  # requests: POST /v1/responses; other_requests: the rest
        self.default: Scripted | Responder = default
        self._queue: deque[Scripted | Responder] = deque()
        self._ids = itertools.count(1)
        self._stopping = asyncio.Event()
        self._arrived = asyncio.Condition()

    # -- scripting -------------------------------------------------------------------------------

    def enqueue(self, *replies: Scripted | Responder) -> None:
        self._queue.extend(replies)

    async def wait_for_requests(self, count: int) -> list[dict[str, Any]]:
        """Wait until at least ``count`` model requests have arrived (bound it with the test's own timeout)."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)
        return self.bodies

    # -- lifecycle and handlers ------------------------------------------------------------------

    shutdown_timeout_s = 0.5

    async def stop(self) -> None:
        self._stopping.set()  # releases stalled handlers
        await super().stop()

    def _model_route(self) -> tuple[str, Handler]:
        return "/v1/responses", self._responses

    def _next(self, body: dict[str, Any]) -> Scripted:
        item = self._queue.popleft() if self._queue else self.default
        if callable(item):
            item = item(body)
        return item

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        logged = await self._log(request)
        self.requests.append(logged)
        async with self._arrived:
            self._arrived.notify_all()
        body = logged.body if isinstance(logged.body, dict) else {}
        reply = self._next(body)
        if isinstance(reply, HttpError):
            return web.json_response(
                {"error": {"message": reply.message, "type": reply.type, "param": None, "code": reply.code}},
                status=reply.status,
            )
        if isinstance(reply, Stall):
            await self._stopping.wait()
            return web.Response(status=503)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        payload = reply.body if isinstance(reply, Garbage) else b"".join(self._events(reply, str(body.get("model"))))
        try:
            await response.write(payload)
            await response.write_eof()
        except ConnectionError:
            pass  # the CLI may hang up mid-stream (interrupts, timeouts)
        return response

    def _events(self, reply: Text | ExecCommand | str, model: str) -> list[bytes]:
        if isinstance(reply, str):
            reply = Text(reply)
        response_id = f"resp_double_{next(self._ids):04d}"
        created = {"id": response_id, "object": "response", "model": model, "status": "in_progress", "output": []}
        events = [_sse({"type": "response.created", "response": created})]
        if isinstance(reply, ExecCommand):
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_double_{next(self._ids):04d}",
                "call_id": reply.call_id or f"call_double_{next(self._ids):04d}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": reply.cmd} | (_ESCALATE if reply.escalate else {})),
                "status": "completed",
            }
            usage = {"input_tokens": 100, "output_tokens": 10}
            cached = reasoning = 0
        else:
            item_id = f"msg_double_{next(self._ids):04d}"
            item = {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
            if reply.deltas:
                events.append(
                    _sse(
                        {
                            "type": "response.output_item.added",
                            "output_index": 0,
                            "item": {**item, "status": "in_progress", "content": []},
                        }
                    )
                )
                for chunk in _chunks(reply.text):
                    events.append(
                        _sse(
                            {
                                "type": "response.output_text.delta",
                                "item_id": item_id,
                                "output_index": 0,
                                "content_index": 0,
                                "delta": chunk,
                            }
                        )
                    )
            usage = {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}
            cached, reasoning = reply.cached_tokens, reply.reasoning_tokens
        events.append(_sse({"type": "response.output_item.done", "output_index": 0, "item": item}))
        full_usage = {
            **usage,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": usage["input_tokens"] + usage["output_tokens"],
        }
        completed = {**created, "status": "completed", "output": [item], "usage": full_usage}
        events.append(_sse({"type": "response.completed", "response": completed}))
        return events


def _chunks(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
