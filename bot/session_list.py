"""``/sessions``: the project's recent sessions, each with a button that makes it the one the chat continues.

Where the list comes from: memory's handoffs of the project (every Claude Code session ingested there — the
bot's, an RPA run's, one run in a terminal — with its headline), joined by session id with this chat's runs
in ``bot.db`` (the sessions the bot ran here, even before their handoff exists). Codex rollouts are left
out: Claude Code cannot resume them. When memory is unavailable the chat's runs alone are listed, and the
list says so.

A session Claude Code no longer has (its transcript deleted, another machine's, another folder's) is not
resumed blindly: the next instruction starts a fresh session grounded in that session's handoff, and the
chat is told in one line (:func:`stand_in_line`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.progress import escape
from bot.records import Callback
from bot.services import Services
from bot.telegram_format import brief
from memory import Memory, MemoryStoreError
from memory.storage import HandoffRow

__all__ = ["MAX_LISTED", "SESSIONS_ACTION", "RecentSession", "SessionList", "age", "handoff_of", "stand_in_line"]

logger = logging.getLogger(__name__)

SESSIONS_ACTION = "sessions"
MAX_LISTED = 8
_BUTTON_TTL_S = 86400.0
# ChatControls.continue_session: (chat, session id, project name) → the line to say.
Continue = Callable[[int, str, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class RecentSession:
    session_id: str
    headline: str  # the handoff's, else the chat's first instruction in it (quoted)
    at: float  # epoch seconds of its latest activity known


def age(seconds: float) -> str:
    """How long ago, in the coarsest unit that says it: "just now", "5 min ago", "3 h ago", "2 d ago"."""
    s = max(0.0, seconds)
    if s < 60:
        return "just now"
    if s < 3600:
        return f"{int(s // 60)} min ago"
    if s < 86400:
        return f"{int(s // 3600)} h ago"
    return f"{int(s // 86400)} d ago"


async def handoff_of(eywa: Memory, session_id: str) -> HandoffRow | None:
    """The session's handoff in memory, or None (never kept, forgotten, or memory unavailable)."""
    try:
        view = await eywa.show(session_id)
    except MemoryStoreError as exc:  # not found, or a broken memory: the caller goes on without it
        logger.info("no handoff of %s: %s", session_id, exc)
        return None
    if view.handoff is None or not view.handoff.markdown.strip():
        return None
    return view.handoff


def stand_in_line(session_id: str, handoff: HandoffRow | None) -> str:
    """The one line saying a fresh session stands in for one Claude Code no longer has."""
    head = f"↪️ Claude Code no longer has session {session_id[:8]}; "
    if handoff is None:
        return head + "memory holds no handoff of it either, so this is a fresh session without it."
    return head + f"starting a fresh session grounded in its handoff ({brief(handoff.headline, 80)})."


class SessionList:
    def __init__(self, services: Services, continue_session: Continue) -> None:
        self.services = services
        self._continue = continue_session

    async def recent(self, chat_id: int) -> tuple[list[RecentSession], str]:
        """The chat project's recent sessions, newest first, and a note ("" or why memory was left out)."""
        s = self.services
        project = await s.project_of(chat_id)
        found: dict[str, RecentSession] = {}
        for session_id, at, instruction in await s.state.recent_sessions(chat_id, project.name, MAX_LISTED):
            found[session_id] = RecentSession(session_id, f"“{brief(' '.join(instruction.split()), 70)}”", at)
        note = ""
        try:
            # Handoffs name the project by its folder, which may differ from its name in MACUPOS_PROJECTS.
            for name in dict.fromkeys([project.name, project.path.name]):
                for h in await s.eywa.list_handoffs(limit=MAX_LISTED * 2, project=name):
                    if h.kind != "main":
                        continue
                    known = found.get(h.session_id)
                    at = max(h.ts, known.at) if known is not None else h.ts
                    found[h.session_id] = RecentSession(h.session_id, h.headline or "(no headline)", at)
        except MemoryStoreError as exc:
            logger.warning("listing sessions without memory: %s", exc)
            note = f"Memory is unavailable ({brief(str(exc), 120)}): only this chat's runs are listed."
        newest = sorted(found.values(), key=lambda r: r.at, reverse=True)[:MAX_LISTED]
        return newest, note

    async def show(self, chat_id: int, user_id: int) -> None:
        """Send the list, one Continue button per session."""
        s = self.services
        project = await s.project_of(chat_id)
        rows, note = await self.recent(chat_id)
        current = (await s.state.chat(chat_id)).session_id
        if not rows:
            text = f"No sessions yet in {project.name}." + (f"\n{note}" if note else "")
            await s.sender.send(chat_id, text, html_text=False)
            return
        now = time.time()
        lines = [f"🧵 <b>Recent sessions in {escape(project.name)}</b>"]
        buttons = []
        for r in rows:
            mark = " ← current" if r.session_id == current else ""
            lines.append(f"• {age(now - r.at)} — {escape(r.headline)} <i>({escape(r.session_id[:8])}){mark}</i>")
            token = await s.state.new_callback(
                chat_id,
                user_id,
                SESSIONS_ACTION,
                {"op": "continue", "session": r.session_id, "project": project.name},
                _BUTTON_TTL_S,
                group=f"sessions-{chat_id}-{int(now)}",
            )
            buttons.append([(f"▶️ {r.session_id[:8]} · {brief(r.headline, 40)}", token)])
        lines.append("Tap one to continue it." + (f"\n<i>{escape(note)}</i>" if note else ""))
        await s.sender.send(chat_id, "\n".join(lines), buttons=buttons)

    async def on_callback(self, callback: Callback) -> str:
        """A tap: the session becomes the chat's current one; the reply line goes to the chat, the toast back."""
        p = callback.payload
        reply = await self._continue(callback.chat_id, str(p.get("session", "")), str(p.get("project", "")))
        await self.services.sender.send(callback.chat_id, reply, html_text=False)
        return reply
