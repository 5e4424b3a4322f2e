"""Codex's approval requests in our terms: the app-server's JSON-RPC requests become :class:`ApprovalRequest`,
the owner's :class:`ApprovalDecision` the app-server's answer, and "allow for this session" is kept here.

The app-server asks with ``item/commandExecution/requestApproval`` (a command, its folder, why) and
``item/fileChange/requestApproval`` (only the item id: the changed files and their diff come with the
``fileChange`` item that starts just before, which :class:`relay.codex.CodexEngine` hands in). Anything it
asks that we do not show the owner is refused: nothing runs on a default.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openai_codex import AsyncCodex, AsyncThread
from openai_codex.generated.v2_all import (
    ApprovalsReviewer,
    AskForApproval,
    AskForApprovalValue,
    SandboxMode,
    ThreadResumeParams,
    ThreadStartParams,
)

from relay.approvals import ApprovalDecision, ApprovalHandler, ApprovalRequest
from relay.stages import StageConfig

log = logging.getLogger(__name__)

__all__ = [
    "APPROVAL_METHODS",
    "COMMAND_APPROVAL",
    "FILE_CHANGE_APPROVAL",
    "ApprovalBridge",
    "CodexGrants",
    "FileChange",
    "answer",
    "approval_request",
    "diff_summary",
    "hook_approvals",
    "open_asking_thread",
    "refusal",
]

COMMAND_APPROVAL = "item/commandExecution/requestApproval"
FILE_CHANGE_APPROVAL = "item/fileChange/requestApproval"
APPROVAL_METHODS = frozenset({COMMAND_APPROVAL, FILE_CHANGE_APPROVAL})
# The protocol's first version (a client that did not ask for v2 gets these): refused, never shown.
_LEGACY = {"execCommandApproval": {"decision": "denied"}, "applyPatchApproval": {"decision": "denied"}}
# "decline": the command or change does not happen and the turn goes on (Codex reads "rejected by user"),
# like a denied Claude tool; "cancel" would end the whole turn.
_DECISIONS = {"allow": "accept", "allow_for_session": "acceptForSession", "deny": "decline"}
_PREVIEW_CHARS = 1500
# The fileChange item is routed before its approval request, so its files arrive almost at once; this only
# bounds the wait should an app-server ever send the request first.
_CHANGES_WAIT_S = 2.0

FileChange = tuple[str, str, str]  # (path, kind: add | delete | update, diff)


def refusal(method: str) -> dict[str, Any]:
    """The answer that lets nothing happen, for any request the app-server may send."""
    if method in APPROVAL_METHODS:
        return {"decision": "decline"}
    return dict(_LEGACY.get(method, {}))


def answer(method: str, decision: ApprovalDecision) -> dict[str, Any]:
    """The app-server's answer to ``method`` for the owner's ``decision``."""
    if method not in APPROVAL_METHODS:
        return refusal(method)
    return {"decision": _DECISIONS[decision.verdict]}


def _relative(path: str, cwd: Path) -> str:
    try:
        return str(Path(path).relative_to(cwd))
    except ValueError:
        return path


def _counts(kind: str, diff: str) -> tuple[int, int]:
    lines = diff.splitlines()
    if kind == "add":  # the new file's text
        return len(lines), 0
    if kind == "delete":  # the old file's text
        return 0, len(lines)
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return added, removed


def diff_summary(changes: Sequence[FileChange], cwd: Path) -> str:
    """One line per file: ``A new.py (+12)``, ``M app.py (+3 −1)``, ``D old.txt (−40)``."""
    letters = {"add": "A", "delete": "D", "update": "M"}
    out = []
    for path, kind, diff in changes:
        added, removed = _counts(kind, diff)
        counts = " ".join(part for part in (f"+{added}" if added else "", f"−{removed}" if removed else "") if part)
        out.append(f"{letters.get(kind, '?')} {_relative(path, cwd)}" + (f" ({counts})" if counts else ""))
    return "\n".join(out)


def _preview(changes: Sequence[FileChange], cwd: Path) -> str:
    parts = [f"--- {_relative(path, cwd)}\n{diff.rstrip()}" for path, _kind, diff in changes]
    text = "\n".join(parts)
    return text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "\n…"


def approval_request(
    method: str, params: Mapping[str, Any], *, stage: str, cwd: Path, changes: Sequence[FileChange] = ()
) -> ApprovalRequest:
    """Our request for one of the app-server's (``method`` in :data:`APPROVAL_METHODS`)."""
    thread = str(params.get("threadId") or "")
    item = str(params.get("approvalId") or params.get("itemId") or "")
    reason = str(params.get("reason") or "")
    if method == COMMAND_APPROVAL:
        command = str(params.get("command") or "")
        folder = str(params.get("cwd") or cwd)
        return ApprovalRequest(thread, "command", {"command": command, "cwd": folder}, item, "codex", stage, "", reason)
    paths = [_relative(path, cwd) for path, _kind, _diff in changes]
    summary = diff_summary(changes, cwd) or "(Codex did not say which files)"
    grant = str(params.get("grantRoot") or "")
    payload: dict[str, Any] = {"paths": paths, "diff": _preview(changes, cwd)}
    if grant:
        payload["grant_root"] = grant
    return ApprovalRequest(thread, "file change", payload, item, "codex", stage, summary, reason)


def _keys(request: ApprovalRequest) -> frozenset[str]:
    """What "allow for this session" covers: this exact command, or changes to these files."""
    if request.tool_name == "command":
        return frozenset({f"command:{request.input.get('command', '')}"})
    paths = request.input.get("paths") or []
    if not paths or request.input.get("grant_root"):
        return frozenset()  # unknown files or a whole folder: never granted by an earlier answer
    return frozenset(f"file:{path}" for path in paths)


class CodexGrants:
    """An :data:`ApprovalHandler` for one Claude session's (or RPA run's) Codex turns: asks ``approve``, or
    refuses when there is no one to ask; what the owner allowed for this session is not asked again."""

    def __init__(self, approve: ApprovalHandler | None) -> None:
        self._approve = approve
        self.granted: set[str] = set()

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        keys = _keys(request)
        if keys and keys <= self.granted:
            return ApprovalDecision.allow_for_session()
        if self._approve is None:
            return ApprovalDecision.deny(f"Codex's {request.tool_name} needs the owner's approval; no one is here.")
        decision = await self._approve(request)
        if decision.verdict == "allow_for_session":
            self.granted |= keys
        return decision


@dataclass(slots=True)
class _Asker:
    """Who answers for one thread while a turn of it runs."""

    approve: ApprovalHandler
    stage: str
    cwd: Path
    loop: asyncio.AbstractEventLoop
    wait_s: float  # the longest one request may wait for an answer (the turn's deadline)
    changes: dict[str, list[FileChange]] = field(default_factory=dict)  # fileChange item id -> its files
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    pending: set[concurrent.futures.Future[dict[str, Any]]] = field(default_factory=set)


class ApprovalBridge:
    """The app-server's requests, answered by the handler of the turn whose thread asks.

    The SDK calls :meth:`__call__` on its reader thread and writes back what it returns; the owner's handler
    runs on the turn's event loop meanwhile. That reader reads nothing else until the answer is in, so a
    turn that ends (cancelled, past its deadline) first calls :meth:`release`: what waits is refused and the
    reader is free to carry the interrupt.
    """

    def __init__(self) -> None:
        self._askers: dict[str, _Asker] = {}

    def ask_for(self, thread_id: str, approve: ApprovalHandler, *, stage: str, cwd: Path, wait_s: float) -> None:
        """Route ``thread_id``'s requests to ``approve`` (call on the event loop, before the turn starts)."""
        self._askers[thread_id] = _Asker(approve, stage, cwd, asyncio.get_running_loop(), wait_s)

    def release(self, thread_id: str) -> None:
        """Stop asking for ``thread_id``: a request still waiting is refused, later ones too."""
        asker = self._askers.pop(thread_id, None)
        if asker is not None:
            for future in list(asker.pending):
                future.cancel()

    def file_change(self, thread_id: str, item_id: str, changes: Sequence[FileChange]) -> None:
        """A ``fileChange`` item started (its approval request may follow): keep its files for the request."""
        asker = self._askers.get(thread_id)
        if asker is not None:
            asker.changes[item_id] = list(changes)
            asker.arrived.set()

    def __call__(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The SDK's approval handler (its reader thread). Never raises: an exception would end the reader."""
        try:
            return self._answer(method, params or {})
        # The SDK's reader thread, every turn's transport, ends on any exception: log it, refuse, carry on.
        except Exception:
            log.exception("answering Codex's %s failed; refused", method)
            return refusal(method)

    def _answer(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        asker = self._askers.get(str(params.get("threadId") or ""))
        if method not in APPROVAL_METHODS or asker is None:
            if method in APPROVAL_METHODS:
                log.info("Codex asked %s for a thread no one answers for: refused", method)
            return refusal(method)
        try:
            future = asyncio.run_coroutine_threadsafe(self._decide(asker, method, params), asker.loop)
        except RuntimeError:  # the loop is closed: the turn is long gone
            return refusal(method)
        asker.pending.add(future)
        try:
            return future.result(timeout=asker.wait_s)
        except (concurrent.futures.CancelledError, TimeoutError):
            future.cancel()
            return refusal(method)
        finally:
            asker.pending.discard(future)

    async def _decide(self, asker: _Asker, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        changes: list[FileChange] = []
        if method == FILE_CHANGE_APPROVAL:
            item = str(params.get("itemId") or "")
            try:
                async with asyncio.timeout(_CHANGES_WAIT_S):
                    while item not in asker.changes:
                        asker.arrived.clear()
                        await asker.arrived.wait()
            except TimeoutError:
                log.info("Codex asked to change files of item %s it never described", item)
            changes = asker.changes.get(item, [])
        request = approval_request(method, params, stage=asker.stage, cwd=asker.cwd, changes=changes)
        return answer(method, await asker.approve(request))


def hook_approvals(codex: AsyncCodex, bridge: ApprovalBridge) -> bool:
    """Hand the app-server's approval requests to ``bridge``; False when this SDK offers no way to.

    openai-codex 0.163 takes an approval handler only on the sync ``CodexClient`` that ``AsyncCodex`` wraps,
    and passes none through: its default accepts every request. Ours refuses all that no owner answers, so
    it is set even for threads that never ask.
    """
    sync = getattr(getattr(codex, "_client", None), "_sync", None)
    if sync is None or not hasattr(sync, "_approval_handler"):
        log.warning("this openai-codex SDK takes no approval handler: stages that ask for approvals cannot run")
        return False
    sync._approval_handler = bridge
    return True


async def open_asking_thread(
    codex: AsyncCodex, cwd: Path, thread_id: str | None, config: StageConfig, developer_instructions: str
) -> AsyncThread:
    """A thread whose approval requests come to us. The SDK's public ``approval_mode`` knows only "never" and
    Codex's own auto-reviewer, so the thread is started (or resumed) with the owner as the reviewer here."""
    policy = AskForApproval(root=AskForApprovalValue(config.approval_policy))
    sandbox = SandboxMode(config.sandbox)
    client = codex._client  # initialised by CodexEngine._ensure
    if thread_id:
        resumed = await client.thread_resume(
            thread_id,
            ThreadResumeParams(
                thread_id=thread_id,
                approval_policy=policy,
                approvals_reviewer=ApprovalsReviewer.user,
                cwd=str(cwd),
                sandbox=sandbox,
                model=config.model,
            ),
        )
        return AsyncThread(codex, resumed.thread.id)
    started = await client.thread_start(
        ThreadStartParams(
            approval_policy=policy,
            approvals_reviewer=ApprovalsReviewer.user,
            cwd=str(cwd),
            sandbox=sandbox,
            model=config.model,
            developer_instructions=developer_instructions,
        )
    )
    return AsyncThread(codex, started.thread.id)
