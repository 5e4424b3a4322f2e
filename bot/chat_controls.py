"""The chat's own commands on its session: /stop, /new, /project, /status, and Continue from /sessions.

They act on the chat's worker and live session (bot.sessions) and answer in one line; none of them starts
a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from bot.services import Services
from bot.sessions import SessionManager, brief_title
from bot.telegram_format import brief

__all__ = ["ChatControls"]


class ChatControls:
    def __init__(self, services: Services, sessions: SessionManager) -> None:
        self.services = services
        self.sessions = sessions

    async def stop(self, chat_id: int) -> str:
        s = self.services
        c = self.sessions.chat(chat_id)
        cancelled = 0
        async with c.lock:
            for q in await s.state.queued(chat_id):
                await s.state.mark_queued(q.id, "cancelled")
                cancelled += 1
            if not c.busy:
                return "Nothing is running." + (f" Cancelled {cancelled} waiting." if cancelled else "")
            c.stopping = True
        interrupted = c.live is not None and await c.live.interrupt()
        if not interrupted and c.worker is not None:
            c.worker.cancel()  # nothing to interrupt politely (RPA, or the CLI still starting)
            with contextlib.suppress(asyncio.CancelledError):
                await c.worker
            c.worker = None
            run = await s.state.running(chat_id)
            if run is not None:
                await s.state.finish_run(run.id, "stopped")
            if c.queue_id is not None:  # stopped before its run was recorded: not to be run at the next start
                await s.state.mark_queued(c.queue_id, "cancelled")
            if c.live is not None:
                await self.sessions.close_live(c)
        extra = f" Cancelled {cancelled} waiting instruction(s)." if cancelled else ""
        return "⏹ Stopped." + extra

    async def continue_session(self, chat_id: int, session_id: str, project: str) -> str:
        """Make ``session_id`` (of ``project``) the one the chat's next instruction continues."""
        s = self.services
        c = self.sessions.chat(chat_id)
        if (await s.project_of(chat_id)).name != project:
            return "That list was for another project; send /sessions again."
        if c.busy:
            return "A session is running: /stop it first, or wait for it to finish."
        if c.idle is not None:
            c.idle.cancel()
            c.idle = None
        if c.live is not None and c.live.session_id != session_id:
            await self.sessions.close_live(c)
        await s.state.set_session(chat_id, session_id)
        return f"▶️ The next instruction continues session {session_id[:8]}."

    async def new(self, chat_id: int) -> str:
        c = self.sessions.chat(chat_id)
        if c.busy:
            return "A session is running: /stop it first, or wait for it to finish."
        if c.idle is not None:
            c.idle.cancel()
            c.idle = None
        await self.sessions.close_live(c)
        await self.services.state.set_session(chat_id, None)
        return "🆕 The next instruction starts a fresh session, grounded in memory."

    async def switch_project(self, chat_id: int, name: str) -> str:
        s = self.services
        if not name.strip():
            current = await s.project_of(chat_id)
            names = ", ".join(p.name for p in s.settings.projects)
            return f"Project: {current.name} ({current.path}). Available: {names}. Use /project NAME."
        project = s.settings.project(name)
        if project is None:
            names = ", ".join(p.name for p in s.settings.projects)
            return f"No project called {brief(name)!r}. Available: {names}."
        c = self.sessions.chat(chat_id)
        if c.busy:
            return "A session is running: /stop it first, or wait for it to finish."
        await self.sessions.close_live(c)
        await s.state.set_project(chat_id, project.name)
        return f"📁 Project {project.name} ({project.path}); the next instruction starts a new session there."

    async def status(self, chat_id: int) -> str:
        s = self.services
        c = self.sessions.chat(chat_id)
        chat = await s.state.chat(chat_id)
        project = await s.project_of(chat_id)
        lines = [f"📁 Project: {project.name} ({project.path})"]
        lines.append(f"🧵 Session: {chat.session_id[:8] if chat.session_id else 'none (next instruction starts one)'}")
        if c.busy:
            lines.append(f"⏳ Running for {time.monotonic() - c.started:.0f} s: {brief_title(c.instruction)}")
        elif c.live is not None:
            lines.append("💤 Live session idle, waiting for a follow-up.")
        else:
            lines.append("Nothing is running.")
        waiting = await s.state.queued(chat_id)
        if waiting:
            lines.append(f"📥 Waiting ({len(waiting)}):")
            lines += [f"  {n}. {brief_title(q.text)}" for n, q in enumerate(waiting, 1)]
        return "\n".join(lines)
