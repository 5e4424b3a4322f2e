"""``/memory on|off|status``: whether a project's sessions feed memory and draw on it.

A private project (``name=path:private`` in ``MACUPOS_PROJECTS``, a folder in ``MACUPOS_PRIVATE_PROJECTS``,
or ``/memory off`` in its chat, kept in bot.db) is never ingested, never sent to the extraction model,
recalls no other project's handoffs and is never recalled into another project (memory.redact.privacy). The bot
writes the folders of its private projects to ``$MACUPOS_HOME/private-projects`` at start and at every
switch: memory, Claude Code's hooks and a ``memory ingest`` run by hand all read that file.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bot.progress import escape
from bot.services import Services
from bot.settings import Project
from memory.redact import Privacy, load_privacy, write_private_file

__all__ = ["ProjectMemory"]

logger = logging.getLogger(__name__)

_ON = "🧠 Memory is <b>on</b> for <b>{name}</b>: its sessions are remembered and recall earlier sessions' handoffs."
_OFF = (
    "🔒 Memory is <b>off</b> for <b>{name}</b> ({why}): its sessions are not remembered, never go to the "
    "extraction model, recall no other project's handoffs and are never recalled in another project."
)


class ProjectMemory:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def _folders(self, off: set[str]) -> list[Path]:
        """What the bot's file lists: the projects marked private in its settings and those turned off."""
        return [p.path for p in self.services.settings.projects if p.private or p.name in off]

    async def sync(self) -> None:
        """Write the bot's private folders for memory and the hooks (at start: a restart loses no switch)."""
        s = self.services
        folders = await self._folders(await s.state.memory_off_projects())
        try:
            await asyncio.to_thread(write_private_file, s.settings.home, folders)
        except OSError as exc:  # the folders marked in MACUPOS_PROJECTS still reach memory through its settings
            logger.warning("could not write the private projects for memory and its hooks: %s", exc)

    def _why(self, project: Project, off: set[str]) -> str:
        if project.private:
            return "marked :private in MACUPOS_PROJECTS"
        if Privacy(self.services.settings.memory.private_projects).covers(project.path):
            return "listed in MACUPOS_PRIVATE_PROJECTS"
        if project.name in off:
            return "turned off with /memory off"
        return "its folder is listed as private"

    async def command(self, chat_id: int, args: str) -> str:
        """The reply (HTML) to ``/memory ARGS`` in a chat: switch or show its project's memory."""
        s = self.services
        project = await s.project_of(chat_id)
        name = escape(project.name)
        word = args.strip().lower()
        off = await s.state.memory_off_projects()
        if word in ("", "status"):
            private = load_privacy(s.settings.memory).covers(project.path) or project.name in off
            return _OFF.format(name=name, why=escape(self._why(project, off))) if private else _ON.format(name=name)
        if word not in ("on", "off"):
            return "Usage: /memory on | off | status"
        wanted = off | {project.name} if word == "off" else off - {project.name}
        try:
            # The file first: until memory reads it there, the switch is not in force, so it is not recorded.
            await asyncio.to_thread(write_private_file, s.settings.home, await self._folders(wanted))
        except OSError as exc:
            return escape(f"Could not switch memory {word}: {exc.strerror or exc}. Nothing changed.")
        await s.state.set_memory_off(project.name, word == "off")
        if word == "on" and load_privacy(s.settings.memory).covers(project.path):
            why = escape(self._why(project, wanted))
            return f"🔒 Memory stays off for <b>{name}</b>: it is {why}; change it there."
        if word == "off":
            return _OFF.format(name=name, why="turned off with /memory off")
        return _ON.format(name=name)
