"""Which lane an instruction goes to, and where a lane works.

The rules, in order (``/help`` says them too):

1. A message in a branch's forum topic goes to that branch.
2. ``@NAME instruction`` goes to branch NAME (made from the main checkout's branch when new); ``@`` naming
   the main checkout's own branch goes to the main checkout.
3. A reply to a message of a session goes to that session's lane.
4. A terse follow-up ("removed; push": one line, at most 8 words) goes to the lane the owner last talked
   to, within an hour; the echo says which.
5. Anything else goes to the main checkout.

A branch is recorded when first named; its worktree is made (or checked) when its session starts.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from telegram.error import TelegramError

from bot.errors import LaneError
from bot.lanes import split_branch, spoken_branch, terse
from bot.records import Branch
from bot.services import Services
from bot.settings import Project
from relay.errors import RelayError
from relay.worktrees import current_branch, ensure_worktree, prepare_spare, valid_branch_name, worktree_path

__all__ = ["FOLLOW_UP_WINDOW_S", "LaneRouter", "Routed", "Where", "git_call"]

logger = logging.getLogger(__name__)

FOLLOW_UP_WINDOW_S = 3600.0
T = TypeVar("T")


async def git_call(services: Services, fn: Callable[..., T], *args: Any) -> T:
    """A relay.worktrees call off the event loop, in the agents' environment (git's identity, PATH)."""
    return await asyncio.to_thread(functools.partial(fn, *args, env=services.relay.env))


@dataclass(frozen=True, slots=True)
class Routed:
    branch: str  # "" the main checkout
    text: str  # the instruction without its @NAME
    note: str = ""  # a line for the chat saying where it went, when that was not explicit


@dataclass(frozen=True, slots=True)
class Where:
    """Where a lane's next instruction runs."""

    project: Project
    folder: Path
    resume: str  # the session it continues ("" a fresh one)
    base: str = ""  # a branch's base
    detached: bool = False  # another project's instruction: its session is not the lane's


class LaneRouter:
    def __init__(self, services: Services) -> None:
        self.services = services
        self._spares: set[asyncio.Task[None]] = set()

    async def route(
        self,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
        forum: bool = False,
        spoken: bool = False,
        now: float,
    ) -> Routed | str:
        """The lane of an instruction, or a sentence for the chat saying why it cannot run."""
        s = self.services
        if not spoken:
            name, rest = split_branch(text)
            me = (s.sender.bot.username or "").casefold()
            if name is not None and me and name.casefold() == me:
                # "@macupos_bot …" in a group (where privacy mode shows the bot only what mentions it) is
                # addressed to the bot, not a branch: what follows is routed by every rule (topic, reply…).
                if not rest:
                    return "Say what to do."
                text = rest
        if thread_id is not None:
            in_topic = await s.state.branch_of_thread(chat_id, thread_id)
            if in_topic is not None:
                return await self._chosen(chat_id, in_topic.branch, text)
        if spoken:
            known = {b.branch for b in await s.state.branches(chat_id)}
            name, rest = spoken_branch(text, known.__contains__)
        else:
            name, rest = split_branch(text)
        if name is not None:
            return await self._named(chat_id, name, rest, forum=forum)
        if reply_to is not None:
            lane = await s.state.lane_of_message(chat_id, reply_to)
            if lane is not None and (lane == "" or await s.state.branch(chat_id, lane) is not None):
                return await self._chosen(chat_id, lane, text)
        chat = await s.state.chat(chat_id)
        last = chat.last_branch
        if last and now - chat.last_branch_at <= FOLLOW_UP_WINDOW_S and await s.state.branch(chat_id, last):
            if terse(text):
                note = f"↪️ @{last}: the session you last talked to (start with @NAME or reply to choose another)."
                return await self._chosen(chat_id, last, text, note)
            note = f"↪️ Main checkout (start with @{last} to continue {last})."
            return await self._chosen(chat_id, "", text, note)
        return Routed("", text)

    async def _chosen(self, chat_id: int, branch: str, text: str, note: str = "") -> Routed:
        await self.services.state.set_last_branch(chat_id, branch)
        return Routed(branch, text, note)

    async def _named(self, chat_id: int, name: str, rest: str, *, forum: bool) -> Routed | str:
        s = self.services
        if not rest.strip():
            return f"What should @{name} do? Send “@{name} instruction”."
        if not valid_branch_name(name):
            return f"“{name}” is not a branch name git accepts (letters, digits, - _ . /; no spaces or “..”)."
        known = await s.state.branch(chat_id, name)
        if known is None:
            project = await s.project_of(chat_id)
            try:
                base = await git_call(self.services, current_branch, project.path)
            except RelayError as exc:
                return f"@{name} needs a git repository: {exc}"
            if name == base:
                return await self._chosen(chat_id, "", rest)  # the main checkout holds that branch
            known = await s.state.add_branch(chat_id, name, project.name, base, str(worktree_path(project.path, name)))
        if forum and known.thread_id is None:
            await self._topic(chat_id, known)
        return await self._chosen(chat_id, name, rest)

    async def _topic(self, chat_id: int, branch: Branch) -> None:
        """Give a branch its own topic in a forum group: what is written there goes to the branch."""
        s = self.services
        try:
            topic = await s.sender.bot.create_forum_topic(chat_id, f"🌿 {branch.branch}"[:128])
        except TelegramError as exc:  # not an admin with "manage topics": the branch works without a topic
            logger.warning("no topic for branch %s in chat %s: %s", branch.branch, chat_id, exc)
            return
        await s.state.set_branch_thread(chat_id, branch.branch, topic.message_thread_id)

    async def ensure_branch(self, chat_id: int, name: str, project: Project) -> tuple[str] | str:
        """Record branch ``name`` of ``project`` for an unattended run (a trigger, a schedule): (the lane,)
        ("" when it is the main checkout's own branch), or why it cannot be."""
        s = self.services
        if not valid_branch_name(name):
            return f"{name!r} is not a branch name git accepts"
        known = await s.state.branch(chat_id, name)
        if known is not None:
            return (name,)
        try:
            base = await git_call(s, current_branch, project.path)
        except RelayError as exc:
            return f"branch {name} needs a git repository: {exc}"
        if name == base:
            return ("",)
        await s.state.add_branch(chat_id, name, project.name, base, str(worktree_path(project.path, name)))
        return (name,)

    async def where(self, chat_id: int, branch: str, project: str = "") -> Where:
        """The project, folder and session of a lane; a branch's worktree is made (or checked) here.

        ``project`` (a schedule's or a trigger's, by name) runs a main-lane instruction in that project: when
        it is not the chat's, it works in a fresh session of its own (``Where.detached``)."""
        s = self.services
        chat = await s.state.chat(chat_id)
        if not branch:
            current = await s.project_of(chat_id)
            named = s.settings.project(project) if project else None
            if named is not None and named.name != current.name:
                return Where(named, named.path, "", detached=True)
            return Where(current, current.path, chat.session_id)
        known = await s.state.branch(chat_id, branch)
        if known is None:
            raise LaneError(branch, "it was discarded; name it again with @ to start it anew")
        found = s.settings.project(known.project)
        if found is None:
            raise LaneError(branch, f"its project {known.project!r} is no longer in MACUPOS_PROJECTS")
        tree = await git_call(self.services, ensure_worktree, found.path, branch, known.base)
        if tree.created:  # the next new branch of this project takes a spare checked out meanwhile
            self._spare(found.path, known.base)
        return Where(found, tree.path, known.session_id, known.base)

    def _spare(self, repo: Path, base: str) -> None:
        async def make() -> None:
            try:
                await git_call(self.services, prepare_spare, repo, base)
            except RelayError as exc:  # only a speed-up: a branch without a spare is checked out as before
                logger.info("no spare worktree for %s: %s", repo, exc)

        task = asyncio.create_task(make(), name=f"spare-{repo.name}")
        self._spares.add(task)
        task.add_done_callback(self._spares.discard)

    async def settle(self, timeout_s: float = 30.0) -> None:
        """Let spare checkouts under way finish (bounded), before the bot closes."""
        if self._spares:
            await asyncio.wait(set(self._spares), timeout=timeout_s)
