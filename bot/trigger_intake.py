"""What a signed trigger becomes in the bot: an instruction queued in the owner's chat (in its branch when it
names one), once per delivery id, run under the trigger profile (``MACUPOS_TRIGGER_PROFILE``, default
``edit``: a CI fix may change files in its own worktree, but runs no command outside the tests and pushes
nothing) and the run cap. The endpoint (bot.triggers) answers 202 only after this returned True.
"""

from __future__ import annotations

import asyncio
import logging

from telegram.error import TelegramError

from bot.services import Services
from bot.sessions import SessionManager
from bot.triggers import Trigger

__all__ = ["TriggerIntake"]

logger = logging.getLogger(__name__)


class TriggerIntake:
    # The "⚡ Triggered" line waits no longer than this (a chat in flood control): the run starts either way,
    # well within the endpoint's deadline for ``accept``.
    announce_timeout_s = 5.0

    def __init__(self, services: Services, sessions: SessionManager) -> None:
        self.services = services
        self.sessions = sessions

    @property
    def chat_id(self) -> int:
        s = self.services.settings
        return s.trigger_chat or s.owner_id

    def project_of(self, full_name: str, name: str) -> str | None:
        """The bot project a GitHub repository is: by its name or owner/name, case-insensitively."""
        for wanted in (full_name, name, full_name.rsplit("/", 1)[-1]):
            found = self.services.settings.project(wanted)
            if found is not None:
                return found.name
        return None

    async def accept(self, t: Trigger) -> bool:
        s = self.services
        chat_id = self.chat_id
        branch = ""
        if t.delivery_id is not None and await s.state.delivery_seen(t.delivery_id):
            return False  # a redelivery: not even its branch is made again (it may have been discarded since)
        named = s.settings.project(t.project) if t.project else None
        project = named or s.settings.default_project
        if t.branch:
            found = await self.sessions.router.ensure_branch(chat_id, t.branch, project)
            if isinstance(found, str):
                raise ValueError(found)  # the endpoint answers 503; the sender may retry after a fix
            branch = found[0]
        queue_id = await s.state.accept_delivery(
            t.delivery_id,
            t.origin,
            chat_id,
            t.text,
            branch=branch,
            profile=s.settings.trigger_profile,
            budget_usd=None,
            project="" if branch else project.name,
        )
        if queue_id is None:
            return False
        where = f" in @{branch}" if branch else ""
        came = f"GitHub {t.event}" if t.origin == "github" else "a signed call"
        try:
            async with asyncio.timeout(self.announce_timeout_s):
                await s.sender.send(
                    chat_id,
                    f"⚡ Triggered ({came}){where}, profile {s.settings.trigger_profile}: {t.text[:500]}",
                    html_text=False,
                )
        except (TelegramError, TimeoutError) as exc:
            logger.warning("could not announce trigger %s: %r", t.delivery_id, exc)
        await self.sessions.run_queued(chat_id, chat_id if chat_id > 0 else s.settings.owner_id, branch)
        return True
