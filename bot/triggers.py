"""Agents started by a signed call: a script or git hook (``POST /trigger``) or a failed GitHub Actions run
(``POST /github``, a repository webhook). The bot runs this endpoint on its own port inside its own asyncio
loop (:class:`TriggerServer`); the integrator hands each instruction to the bot through ``accept``.

Every request is signed as GitHub signs its webhook deliveries: ``X-Hub-Signature-256: sha256=<hex>``, the
HMAC-SHA256 of the raw body under the shared secret (:func:`sign`), compared in constant time. The order of
checks, each answered before the next is done:

1. a missing ``X-Hub-Signature-256`` → 401, before one body byte is read;
2. ``Content-Length`` over the cap → 413 (and the connection closed) before one body byte is read; a chunked
   body is counted as it streams in and refused (413) as soon as it passes the cap, so at most the cap is ever
   held; a body that takes longer than ``body_timeout_s`` → 408; ``Content-Encoding`` other than identity → 415;
3. a signature that does not match → 401; the body is never parsed;
4. ``X-GitHub-Delivery``: GitHub always sends it (a GUID), and ``/github`` requires it (400 without). On
   ``/trigger`` it is **optional**: with it, a retried call (the same id) runs once; without it every call is
   a new instruction (``Trigger.delivery_id`` is None; no hash of the body stands in for it, so the same text
   sent twice on purpose runs twice). An id is 1-128 of ``A-Z a-z 0-9 . _ : -`` (400 otherwise), so it can
   be logged as it is;
5. the JSON body (400 naming what is wrong), then ``accept(trigger)``.

Answers (JSON bodies; errors are ``{"error": "..."}``):

* 202 ``{"status": "accepted", "id": <delivery id or null>}``: only after ``accept`` returned True, so a 2xx
  means the instruction was stored;
* 200 ``{"status": "duplicate", "id": ...}``: ``accept`` returned False (that delivery id was seen before);
  nothing runs again;
* 200 ``{"status": "pong"}`` for GitHub's ``ping`` (nothing runs; a ``warning`` is added when the hook is
  not subscribed to ``workflow_run``);
* 202 ``{"status": "ignored", "reason": ...}`` for any other GitHub event, a ``workflow_run`` that is not
  ``completed``, or one whose conclusion is not a failure (``failure``, ``timed_out``, ``startup_failure``);
  ``accept`` is not called;
* 400 malformed (not JSON, not an object, missing or empty ``text``, unknown fields, a branch name git would
  refuse, a bad delivery id); 401 signature; 404 unknown path; 405 wrong method; 408 slow body (or slow
  request head, from the protocol below the app); 413 too large; 415 not JSON / compressed;
  503 ``accept`` raised or took longer than ``accept_timeout_s`` (logged with its traceback); the sender may
  retry with the same delivery id.

Logs name the route, delivery id, event and outcome, never the secret, the signature or the text.

A failed run becomes the instruction (:func:`ci_failure_text`)::

    CI failed on BRANCH: WORKFLOW (run #N, CONCLUSION, URL). Failing commit SHA7: "FIRST LINE". Find out
    why and fix it.

to run on ``workflow_run.head_branch``, in the project ``resolve_project(full_name, name)`` names
(:func:`project_matcher` builds one from the bot's project names; None → the default project).

The server speaks plain HTTP; bind it to 127.0.0.1 (the default) and put a TLS proxy or tunnel in front of it
for GitHub to reach it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = [
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "FAILED_CONCLUSIONS",
    "SIGNATURE_HEADER",
    "Accept",
    "ProjectResolver",
    "Trigger",
    "TriggerLimits",
    "build_trigger_app",
    "ci_failure_text",
    "project_matcher",
    "sign",
    "valid_branch",
]

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Hub-Signature-256"
DELIVERY_HEADER = "X-GitHub-Delivery"
EVENT_HEADER = "X-GitHub-Event"
FAILED_CONCLUSIONS = frozenset({"failure", "timed_out", "startup_failure"})
MIB = 1024 * 1024

_DELIVERY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_EVENT_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_TRIGGER_FIELDS = frozenset({"text", "project", "branch"})
# What git check-ref-format refuses anywhere in a name: control characters, space, ~ ^ : ? * [ \ and DEL.
_BAD_REF_CHARS = re.compile(r"[\x00-\x20~^:?*\[\\\x7f]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Trigger:
    """One instruction that arrived signed: what to run, where, and where it came from."""

    delivery_id: str | None  # None: a /trigger call without X-GitHub-Delivery (never a duplicate)
    text: str
    project: str | None  # None: the default project
    branch: str | None  # None: the project's current checkout
    origin: Literal["trigger", "github"]
    event: str  # "trigger", or the GitHub event ("workflow_run")


Accept = Callable[[Trigger], Awaitable[bool]]
"""Stores a trigger for the bot to run; False when its delivery id was seen before (nothing runs again)."""

ProjectResolver = Callable[[str, str], str | None]
"""``(repository full_name, repository name)`` → the bot's project name, or None for the default project."""


@dataclass(frozen=True)
class TriggerLimits:
    """Caps and deadlines of the endpoint."""

    body_bytes: int = 1 * MIB
    header_bytes: int = 16 * 1024  # the request line and header fields (431 past it)
    head_timeout_s: float = 10.0  # to send the request head (408, or the connection closed)
    body_timeout_s: float = 10.0  # to send the body once the head is in (408)
    accept_timeout_s: float = 15.0  # for ``accept`` to store the instruction (503)
    max_connections: int = 64  # open connections or requests at once; past it uvicorn answers 503
    keep_alive_s: float = 5.0
    stop_timeout_s: float = 5.0  # requests in flight get this long to finish when the server stops


def sign(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value for ``body``: ``sha256=`` and the hex HMAC-SHA256 under ``secret``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def valid_branch(name: str) -> bool:
    """Whether git would take ``name`` as a branch name (git check-ref-format's rules), so it can never be
    read as an option (``-…``) or a revision expression by the git commands it reaches."""
    if not 0 < len(name) <= 255 or name == "@" or _BAD_REF_CHARS.search(name):
        return False
    if name.startswith(("-", "/")) or name.endswith(("/", ".", ".lock")):
        return False
    if ".." in name or "//" in name or "@{" in name:
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))


def project_matcher(projects: Iterable[str]) -> ProjectResolver:
    """A resolver that names the project whose name equals the repository's ``full_name`` or ``name``
    (ignoring case; the full name first), else None (the default project)."""
    by_lower: dict[str, str] = {}
    for project in projects:
        by_lower.setdefault(project.lower(), project)

    def resolve(full_name: str, name: str) -> str | None:
        for candidate in (full_name, name):
            if candidate and candidate.lower() in by_lower:
                return by_lower[candidate.lower()]
        return None

    return resolve


def _one_line(value: object, limit: int) -> str:
    """A payload string fit for one line of an instruction: control characters as spaces, at most
    ``limit`` characters."""
    text = " ".join(_CONTROL.sub(" ", str(value)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ci_failure_text(run: Mapping[str, Any]) -> str:
    """The instruction for a failed ``workflow_run`` object (the webhook's ``workflow_run`` field)."""
    branch = run.get("head_branch")
    where = _one_line(branch, 255) if isinstance(branch, str) and branch else "a detached head"
    name = _one_line(run.get("name") or "a workflow", 200)
    facts = []
    if run.get("run_number") is not None:
        facts.append(f"run #{_one_line(run['run_number'], 20)}")
    facts.append(_one_line(run.get("conclusion"), 40))
    if run.get("html_url"):
        facts.append(_one_line(run["html_url"], 300))
    text = f"CI failed on {where}: {name} ({', '.join(facts)})."
    sha = run.get("head_sha")
    if isinstance(sha, str) and sha:
        commit = run.get("head_commit")
        message = commit.get("message") if isinstance(commit, Mapping) else None
        first = message.strip().splitlines()[0] if isinstance(message, str) and message.strip() else ""
        text += f" Failing commit {_one_line(sha[:7], 7)}"
        text += f': "{_one_line(first, 200)}".' if first else "."
    return text + " Find out why and fix it."


class _Refusal(Exception):
    """A request answered with an error before (or instead of) ``accept``."""

    def __init__(self, status: int, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close  # the body may be left unread: end the connection after the answer

    def response(self) -> Response:
        headers = {"connection": "close"} if self.close else None
        return JSONResponse({"error": self.message}, status_code=self.status, headers=headers)


@dataclass(frozen=True)
class _Ignored:
    """A delivery answered without running anything: GitHub's ping (``pong``), or an event not handled."""

    reason: str
    pong: bool = False
    warning: str | None = None


class _Endpoint:
    """The two routes' shared checks (signature, size, delivery id) and their answers."""

    def __init__(
        self, secret: str, accept: Accept, resolve_project: ProjectResolver | None, limits: TriggerLimits
    ) -> None:
        if not secret:
            raise ValueError("the trigger endpoint needs a non-empty secret")
        self._key = secret.encode()
        self._accept = accept
        self._resolve = resolve_project
        self._limits = limits

    async def trigger(self, request: Request) -> Response:
        return await self._handle(request, "trigger")

    async def github(self, request: Request) -> Response:
        return await self._handle(request, "github")

    async def _handle(self, request: Request, route: Literal["trigger", "github"]) -> Response:
        shown_id = _shown(request.headers.get(DELIVERY_HEADER))
        event = "trigger" if route == "trigger" else _shown(request.headers.get(EVENT_HEADER))
        try:
            body = await self._signed_body(request)
            delivery_id = _delivery_id(request, required=route == "github")
            outcome = self._trigger(body, delivery_id) if route == "trigger" else self._github(request, body)
        except _Refusal as refusal:
            level = logging.WARNING if refusal.status == 401 else logging.INFO
            logger.log(level, "%s delivery %s (event %s): %s %s", route, shown_id, event, refusal.status, refusal)
            return refusal.response()
        if isinstance(outcome, _Ignored):
            logger.info("%s delivery %s (event %s): ignored, %s", route, shown_id, event, outcome.reason)
            if outcome.pong:
                warning = {"warning": outcome.warning} if outcome.warning else {}
                return JSONResponse({"status": "pong", **warning}, status_code=200)
            return JSONResponse({"status": "ignored", "reason": outcome.reason}, status_code=202)
        try:
            async with asyncio.timeout(self._limits.accept_timeout_s):
                fresh = await self._accept(outcome)
        except Exception:
            logger.exception("%s delivery %s (event %s): could not be stored", route, shown_id, event)
            return JSONResponse({"error": "the bot could not store the instruction; retry later"}, status_code=503)
        if not fresh:
            logger.info("%s delivery %s (event %s): duplicate, nothing runs", route, shown_id, event)
            return JSONResponse({"status": "duplicate", "id": outcome.delivery_id}, status_code=200)
        logger.info("%s delivery %s (event %s): accepted", route, shown_id, event)
        return JSONResponse({"status": "accepted", "id": outcome.delivery_id}, status_code=202)

    async def _signed_body(self, request: Request) -> bytes:
        signature = request.headers.get(SIGNATURE_HEADER)
        if not signature:
            raise _Refusal(401, f"the request is not signed: {SIGNATURE_HEADER} is missing", close=True)
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":
            raise _Refusal(415, f"Content-Encoding {encoding!r} is not accepted: send the body as it is", close=True)
        body = await self._body(request)
        expected = "sha256=" + hmac.new(self._key, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.strip().encode("latin-1")):
            raise _Refusal(401, f"{SIGNATURE_HEADER} does not match the body under the shared secret")
        return body

    async def _body(self, request: Request) -> bytes:
        cap = self._limits.body_bytes
        too_large = _Refusal(413, f"the body is larger than {cap} bytes", close=True)
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                raise _Refusal(400, "Content-Length is not a number", close=True)
            if int(declared) > cap:
                raise too_large
        parts: list[bytes] = []
        seen = 0
        try:
            async with asyncio.timeout(self._limits.body_timeout_s):
                async for chunk in request.stream():
                    seen += len(chunk)
                    if seen > cap:
                        raise too_large
                    parts.append(chunk)
        except TimeoutError:
            raise _Refusal(
                408, f"the body took longer than {self._limits.body_timeout_s:g} s to arrive", close=True
            ) from None
        except ClientDisconnect:
            raise _Refusal(400, "the client went away before the body was complete", close=True) from None
        return b"".join(parts)

    def _trigger(self, body: bytes, delivery_id: str | None) -> Trigger:
        payload = _json_object(body)
        unknown = sorted(set(payload) - _TRIGGER_FIELDS)
        if unknown:
            raise _Refusal(400, f"unknown field(s) {', '.join(unknown)}: the body takes text, project and branch")
        text = payload.get("text")
        if not isinstance(text, str):
            raise _Refusal(400, 'the body needs "text": the instruction, a string')
        if not text.strip():
            raise _Refusal(400, '"text" is empty')
        project = payload.get("project")
        if project is not None and (not isinstance(project, str) or not project or _CONTROL.search(project)):
            raise _Refusal(400, '"project" must be a project name (a non-empty string on one line)')
        branch = payload.get("branch")
        if branch is not None and (not isinstance(branch, str) or not valid_branch(branch)):
            raise _Refusal(400, '"branch" must be a branch name git accepts')
        return Trigger(delivery_id, text.strip(), project, branch, "trigger", "trigger")

    def _github(self, request: Request, body: bytes) -> Trigger | _Ignored:
        event = request.headers.get(EVENT_HEADER, "").strip()
        if not _EVENT_NAME.fullmatch(event):
            raise _Refusal(400, f"{EVENT_HEADER} is missing or not an event name")
        content_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if content_type == "application/x-www-form-urlencoded":
            raise _Refusal(415, "set the webhook's content type to application/json")
        payload = _json_object(body)
        delivery_id = request.headers.get(DELIVERY_HEADER, "").strip()
        if event == "ping":
            hook = payload.get("hook")
            events = hook.get("events") if isinstance(hook, dict) else None
            if isinstance(events, list) and not {"workflow_run", "*"} & {str(e) for e in events}:
                logger.warning("github ping %s: the webhook is not subscribed to workflow_run", delivery_id)
                warning = "this webhook is not subscribed to workflow_run: failed runs will not arrive"
                return _Ignored("ping", pong=True, warning=warning)
            return _Ignored("ping", pong=True)
        if event != "workflow_run":
            return _Ignored(f"event {event} is not handled")
        run = payload.get("workflow_run")
        if not isinstance(run, dict):
            raise _Refusal(400, 'a workflow_run delivery needs a "workflow_run" object')
        action = payload.get("action")
        if action != "completed":
            return _Ignored(f"workflow_run {_one_line(action, 40)} (only completed runs are handled)")
        conclusion = run.get("conclusion")
        if conclusion not in FAILED_CONCLUSIONS:
            return _Ignored(f"conclusion {_one_line(conclusion, 40)} is not a failure")
        branch = run.get("head_branch")
        if branch is not None and (not isinstance(branch, str) or not valid_branch(branch)):
            raise _Refusal(400, "workflow_run.head_branch is not a branch name git accepts")
        repository = payload.get("repository")
        project = None
        if self._resolve is not None and isinstance(repository, dict):
            full_name, name = repository.get("full_name"), repository.get("name")
            project = self._resolve(
                full_name if isinstance(full_name, str) else "", name if isinstance(name, str) else ""
            )
        return Trigger(delivery_id, ci_failure_text(run), project, branch or None, "github", event)


def _shown(value: str | None) -> str:
    """A header value as it may appear in a log line: a well-formed delivery id or event name, else a mark."""
    if value is None:
        return "-"
    value = value.strip()
    return value if _DELIVERY_ID.fullmatch(value) else "(malformed)"


def _delivery_id(request: Request, *, required: bool) -> str | None:
    value = request.headers.get(DELIVERY_HEADER)
    if value is None or not value.strip():
        if required:
            raise _Refusal(400, f"{DELIVERY_HEADER} is missing")
        return None
    value = value.strip()
    if not _DELIVERY_ID.fullmatch(value):
        raise _Refusal(400, f"{DELIVERY_HEADER} must be 1-128 of A-Z a-z 0-9 . _ : - (a UUID, say)")
    return value


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Refusal(400, f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise _Refusal(400, "the body is not JSON: nested too deeply") from None
    if not isinstance(payload, dict):
        raise _Refusal(400, "the body must be a JSON object")
    return payload


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


def build_trigger_app(
    secret: str,
    accept: Accept,
    *,
    resolve_project: ProjectResolver | None = None,
    limits: TriggerLimits | None = None,
) -> Starlette:
    """The ASGI app: ``POST /trigger`` and ``POST /github`` (see the module docstring)."""
    endpoint = _Endpoint(secret, accept, resolve_project, limits or TriggerLimits())
    routes = [
        Route("/trigger", endpoint.trigger, methods=["POST"]),
        Route("/github", endpoint.github, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
