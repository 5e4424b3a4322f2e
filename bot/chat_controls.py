"""The chat's own commands on its session: /stop, /new, /project, /status, and Continue from /sessions.

They act on the chat's worker and live session (bot.sessions) and answer in one line; none of them starts
a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from bot.lanes import branch_label, split_branch
from bot.services import Services
from bot.sessions import ChatSession, SessionManager, brief_title
from bot.telegram_format import brief

__all__ = ["ChatControls"]

_NOTHING = "Nothing is running."


class ChatControls:
    def __init__(self, services: Services, sessions: SessionManager) -> None:
        self.services = services
        self.sessions = sessions

    async def stop(self, chat_id: int, args: str = "") -> str:
        """``/stop``: every lane of the chat; ``/stop @NAME``: that branch's only."""
        name, _ = split_branch(args)
        lanes = [self.sessions.chat(chat_id, name)] if name is not None else self.sessions.lanes(chat_id)
        if not lanes:
            lanes = [self.sessions.chat(chat_id)]
        replies = [await self._stop_lane(c) for c in lanes]
        stopped = [r for r in replies if r != _NOTHING]
        return "\n".join(stopped) if stopped else _NOTHING

    async def _stop_lane(self, c: ChatSession) -> str:
        s = self.services
        chat_id = c.chat_id
        label = branch_label(c.branch)
        cancelled = 0
        async with c.lock:
            for q in await s.state.queued(chat_id, c.branch):
                await s.state.mark_queued(q.id, "cancelled")
                cancelled += 1
            if not c.busy:
                return f"{label}Cancelled {cancelled} waiting." if cancelled else _NOTHING
            c.stopping = True
        interrupted = c.live is not None and await c.live.interrupt()
        if not interrupted and c.worker is not None:
            c.worker.cancel()  # nothing to interrupt politely (RPA, the CLI still starting, a lane waiting its slot)
            with contextlib.suppress(asyncio.CancelledError):
                await c.worker
            c.worker = None
            run = await s.state.running(chat_id, c.branch)
            if run is not None:
                await s.state.finish_run(run.id, "stopped")
            if c.queue_id is not None:  # stopped before its run was recorded: not to be run at the next start
                await s.state.mark_queued(c.queue_id, "cancelled")
            if c.live is not None:
                await self.sessions.close_live(c)
        extra = f" Cancelled {cancelled} waiting instruction(s)." if cancelled else ""
        return f"⏹ {label}Stopped." + extra

    async def continue_session(self, chat_id: int, session_id: str, project: str) -> str:
        """Make ``session_id`` (of ``project``) the one the chat's next instruction continues."""
        s = self.services
        c = self.sessions.chat(chat_id)
        if (await s.project_of(chat_id)).name != project:
            return "That list was for another project; send /sessions again."
        if not await self.sessions.settled(c):
            return "A session is running: /stop it first, or wait for it to finish."
        if c.idle is not None:
            c.idle.cancel()
            c.idle = None
        if c.live is not None and c.live.session_id != session_id:
            await self.sessions.close_live(c)
        await s.state.set_session(chat_id, session_id)
        return f"▶️ The next instruction continues session {session_id[:8]}."

    async def new(self, chat_id: int, args: str = "") -> str:
        """``/new``: the main checkout's next instruction starts fresh; ``/new @NAME``: that branch's."""
        name, _ = split_branch(args)
        c = self.sessions.chat(chat_id, name or "")
        if not await self.sessions.settled(c):
            return "A session is running: /stop it first, or wait for it to finish."
        if c.branch and await self.services.state.branch(chat_id, c.branch) is None:
            return f"No branch {c.branch} here; /branches lists them."
        if c.idle is not None:
            c.idle.cancel()
            c.idle = None
        await self.sessions.close_live(c)
        await self.sessions.set_session(c, None)
        return f"🆕 {branch_label(c.branch)}The next instruction starts a fresh session, grounded in memory."

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
        if not await self.sessions.settled(c):
            return "A session is running: /stop it first, or wait for it to finish."
        await self.sessions.close_live(c)
        await s.state.set_project(chat_id, project.name)
        return f"📁 Project {project.name} ({project.path}); the next instruction starts a new session there."

    async def status(self, chat_id: int) -> str:
        s = self.services
        chat = await s.state.chat(chat_id)
        project = await s.project_of(chat_id)
        lines = [f"📁 Project: {project.name} ({project.path})"]
        lines.append(f"🧵 Session: {chat.session_id[:8] if chat.session_id else 'none (next instruction starts one)'}")
        lines.append(self._lane_line(self.sessions.chat(chat_id)))
        waiting = await s.state.queued(chat_id, None)
        for b in await s.state.branches(chat_id):
            lines.append(f"🌿 {b.branch}: {self._lane_line(self.sessions.chat(chat_id, b.branch))}")
        if waiting:
            lines.append(f"📥 Waiting ({len(waiting)}):")
            lines += [f"  {n}. {branch_label(q.branch)}{brief_title(q.text)}" for n, q in enumerate(waiting, 1)]
        return "\n".join(lines)

    def _lane_line(self, c: ChatSession) -> str:
        place = self.sessions.slots.place(c.tag)
        if place is not None:
            return f"⏳ Waiting for a free slot ({place} in line): {brief_title(c.instruction)}"
        if c.busy:
            return f"⏳ Running for {time.monotonic() - c.started:.0f} s: {brief_title(c.instruction)}"
        if c.live is not None:
            return "💤 Live session idle, waiting for a follow-up."
        return "Nothing is running."
