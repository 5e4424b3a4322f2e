"""``/branches``: each branch's worktree with its state, age, changes and cost, and what to do with it.

Buttons: **Diff** (a summary and the whole patch as a file), **Merge** (into the base branch of the main
checkout, fast-forward when possible, else a merge commit, only when the main checkout is clean; on a
conflict nothing there changes and **Resolve** starts a session in the worktree that merges the base in,
after which Merge is offered again), **Push** after a merge when the project has a remote (confirmed), and
**Discard** (confirmed; a branch with work not merged needs a second, explicit confirm), **Continue** (the
next short follow-up goes to that branch). The git work is relay.worktrees, run off the event loop.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from telegram.error import TelegramError

from bot.lane_router import git_call
from bot.lanes import LaneTag, in_lane
from bot.records import Branch, Callback
from bot.roles import DECIDER
from bot.sender import Button, send_cards
from bot.services import Services
from bot.sessions import ChatSession, SessionManager, Task
from relay.errors import RelayError
from relay.worktrees import (
    diff_stat,
    discard,
    has_uncommitted,
    merge,
    patch,
    push,
    remote_of,
    resolve_instruction,
    unmerged_commits,
)

__all__ = ["BRANCH_ACTION", "BranchDesk", "age_text"]

logger = logging.getLogger(__name__)

BRANCH_ACTION = "branch"
# A listed branch's buttons, (label, op) by row.
_LIST_OPS = (
    (("🔍 Diff", "diff"), ("🔀 Merge", "merge")),
    (("🗑 Discard", "discard"), ("▶️ Continue", "continue")),
)
_TTL_S = 2 * 86400.0
_GONE = "That branch is gone (discarded)."
_MAX_FILES_SHOWN = 15
_NEEDS_IDLE = frozenset({"merge", "discard", "discard-confirmed", "discard-for-good", "resolve"})


def age_text(seconds: float) -> str:
    if seconds < 3600:
        return f"{max(1, int(seconds // 60))} min"
    if seconds < 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


class BranchDesk:
    def __init__(self, services: Services, sessions: SessionManager, clock: Callable[[], float] = time.time) -> None:
        self.services = services
        self.sessions = sessions
        self._clock = clock
        sessions.after_run.append(self._after_run)

    # -- the list ----------------------------------------------------------------------------------

    async def show(self, chat_id: int, user_id: int) -> None:
        async def entry(b: Branch) -> tuple[str, list[list[Button]]]:
            buttons = [[(label, await self._button(b, user_id, op)) for label, op in row] for row in _LIST_OPS]
            return await self.card(b), buttons

        s = self.services
        empty = "No branches yet. Start one with “@NAME instruction” (e.g. @fix-login …)."
        await send_cards(s.sender, chat_id, await s.state.branches(chat_id), empty, entry)

    def state_of(self, c: ChatSession) -> str:
        if self.sessions.slots.place(c.tag) is not None:
            return "waiting for a free slot"
        if c.busy:
            return "waiting for an approval" if c.asking else "running"
        if c.last_status:
            return "done" if c.last_status == "done" else c.last_status
        return "idle"

    async def card(self, b: Branch) -> str:
        s = self.services
        c = self.sessions.chat(b.chat_id, b.branch)
        await self.sessions.settled(c)  # a list asked for right after the answer says done, not running
        lines = [f"🌿 {b.branch} (from {b.base}, project {b.project})"]
        lines.append(f"{self.state_of(c)} · {age_text(self._clock() - b.created_at)} old")
        project = s.settings.project(b.project)
        if project is not None:
            try:
                stat = await git_call(self.services, diff_stat, project.path, b.branch, b.base)
                lines.append(f"{len(stat.files)} file(s) changed, +{stat.added} −{stat.removed}")
            except RelayError as exc:
                lines.append(f"changes unknown: {exc}")
        cost = await s.state.branch_cost(b.chat_id, b.branch)
        lines.append(f"cost ${cost:.2f}")
        return "\n".join(lines)

    async def _button(self, b: Branch, user_id: int, op: str, *, group: str | None = None, **extra: object) -> str:
        payload = {"op": op, "branch": b.branch, **extra}
        state = self.services.state
        return await state.new_callback(b.chat_id, user_id, BRANCH_ACTION, payload, _TTL_S, group=group)

    async def _confirm(self, b: Branch, user_id: int, question: str, yes: tuple[str, str], no_label: str) -> None:
        """Ask ``question`` in the branch's chat with a yes button (``yes``: its label and op) and a cancel one:
        pressing either retires both."""
        yes_label, yes_op = yes
        yes_token = await self._button(b, user_id, yes_op)
        no_token = await self._button(b, user_id, "cancel", group=yes_token)
        buttons = [[(yes_label, yes_token), (no_label, no_token)]]
        await self.services.sender.send(b.chat_id, question, html_text=False, buttons=buttons)

    # -- the buttons -------------------------------------------------------------------------------

    async def on_callback(self, callback: Callback) -> str:
        s = self.services
        chat_id, user_id = callback.chat_id, callback.user_id
        op = str(callback.payload.get("op", ""))
        b = await s.state.branch(chat_id, str(callback.payload.get("branch", "")))
        if b is None:
            return _GONE
        project = s.settings.project(b.project)
        if project is None:
            return f"Its project {b.project} is no longer configured."
        c = self.sessions.chat(chat_id, b.branch)
        with in_lane(LaneTag(chat_id, b.branch, b.thread_id)):
            try:
                return await self._do(op, b, c, user_id, project.path, callback.payload)
            except RelayError as exc:
                await self._say(chat_id, f"❌ {b.branch}: {exc}")
                return "It did not work."

    async def _do(
        self, op: str, b: Branch, c: ChatSession, user_id: int, repo: Path, payload: Mapping[str, Any]
    ) -> str:
        s = self.services
        chat_id = b.chat_id
        if op == "diff":
            stat = await git_call(self.services, diff_stat, repo, b.branch, b.base)
            if not stat.files:
                await self._say(chat_id, f"🌿 {b.branch}: no changes against {b.base}.")
                return "No changes."
            shown = [f"• {f.path} +{f.added} −{f.removed}" for f in stat.files[:_MAX_FILES_SHOWN]]
            more = len(stat.files) - len(shown)
            summary = f"🌿 {b.branch} against {b.base}: {len(stat.files)} file(s), +{stat.added} −{stat.removed}"
            await self._say(chat_id, "\n".join([summary, *shown] + ([f"… and {more} more"] if more > 0 else [])))
            text = await git_call(self.services, patch, repo, b.branch, b.base)
            name = b.branch.replace("/", "-")
            await s.sender.document(chat_id, text.encode(), f"{name}.patch", caption=f"{b.branch} against {b.base}")
            return "Diff sent."
        # settled: a worker whose answer is out (or that just offered Merge after a Resolve) is given a moment to
        # finish its bookkeeping, so a press right after the answer is not told the branch is running.
        if op in _NEEDS_IDLE and not await self.sessions.settled(c):
            return f"{b.branch} is running: wait for it, or /stop @{b.branch}."
        if op == "merge":
            return await self._merge(b, user_id, repo)
        if op == "resolve":
            files = [str(f) for f in payload.get("files", [])]
            await self.sessions.submit(
                chat_id, user_id, resolve_instruction(b.branch, b.base, files), "resolve", branch=b.branch
            )
            return "Resolving."
        if op == "push":
            remote = await git_call(self.services, remote_of, repo, b.base)
            if remote is None:  # removed since the merge offered it
                await self._say(chat_id, f"❌ {b.branch}: the project has no remote to push {b.base} to.")
                return "No remote."
            await self._confirm(b, user_id, f"Push {b.base} to {remote}?", ("⬆️ Push", "push-confirmed"), "✖️ Cancel")
            return "Confirm the push."
        if op == "push-confirmed":
            line = await git_call(self.services, push, repo, b.base)
            await self._say(chat_id, f"⬆️ {line[:1].upper()}{line[1:]}.")
            return "Pushed."
        if op == "discard":
            await self._confirm(
                b,
                user_id,
                f"Discard {b.branch}? Its worktree is removed and the branch deleted.",
                ("🗑 Discard", "discard-confirmed"),
                "✖️ Keep",
            )
            return "Confirm the discard."
        if op == "discard-confirmed":
            commits = await git_call(self.services, unmerged_commits, repo, b.branch, b.base)
            dirty = await git_call(self.services, has_uncommitted, repo, b.branch)
            if commits or dirty:
                what = [f"{commits} commit(s) not merged into {b.base}"] if commits else []
                what += ["changes never committed"] if dirty else []
                await self._confirm(
                    b,
                    user_id,
                    f"⚠️ {b.branch} has {' and '.join(what)}. Discarding loses them for good.",
                    ("🗑 Discard for good", "discard-for-good"),
                    "✖️ Keep",
                )
                return "Its work is not merged: confirm again."
            return await self._discard(b, repo)
        if op == "discard-for-good":
            return await self._discard(b, repo)
        if op == "continue":
            await s.state.set_last_branch(chat_id, b.branch)
            await self._say(chat_id, f"▶️ Your next short follow-up goes to {b.branch} (or start with @{b.branch}).")
            return "Continuing."
        return "Cancelled." if op == "cancel" else "Unknown button."

    async def _merge(self, b: Branch, user_id: int, repo: Path) -> str:
        s = self.services
        chat_id = b.chat_id
        result = await git_call(self.services, merge, repo, b.branch, b.base)
        if result.outcome == "conflict":
            names = ", ".join(result.files[:_MAX_FILES_SHOWN])
            resolve = await self._button(b, user_id, "resolve", files=list(result.files[:50]))
            await s.sender.send(
                chat_id,
                f"⚠️ {b.branch} conflicts with {b.base} in: {names}. Nothing in the main checkout changed.\n"
                f"Resolve starts a session in {b.branch}'s worktree that merges {b.base} in; then you are asked again.",
                html_text=False,
                buttons=[[("🛠 Resolve", resolve)]],
            )
            return "Conflict."
        how = {"fast-forward": "fast-forward", "merge-commit": "merge commit", "up-to-date": "already merged"}
        text = f"✅ {b.branch} merged into {b.base} ({how[result.outcome]}, {len(result.files)} file(s))."
        if chat_id < 0 and (by := DECIDER.get()):  # a team room: say who decided
            text += f" Merged by {by}."
        remote = await git_call(self.services, remote_of, repo, b.base)
        if remote is None or result.outcome == "up-to-date":
            await self._say(chat_id, text)
        else:
            button = await self._button(b, user_id, "push")
            await s.sender.send(chat_id, text, html_text=False, buttons=[[(f"⬆️ Push to {remote}", button)]])
        return "Merged."

    async def _discard(self, b: Branch, repo: Path) -> str:
        s = self.services
        c = self.sessions.chat(b.chat_id, b.branch)
        if not await self.sessions.settled(c):
            return f"{b.branch} is running: wait for it, or /stop @{b.branch}."
        if c.idle is not None:
            c.idle.cancel()
            c.idle = None
        await self.sessions.close_live(c)
        await git_call(self.services, discard, repo, b.branch)
        await s.state.remove_branch(b.chat_id, b.branch)
        self.sessions.forget_lane(b.chat_id, b.branch)
        if b.thread_id is not None:
            with contextlib.suppress(TelegramError):
                await s.sender.bot.close_forum_topic(b.chat_id, b.thread_id)
        by = f" Discarded by {DECIDER.get()}." if DECIDER.get() and b.chat_id < 0 else ""
        await self._say(b.chat_id, f"🗑 {b.branch} discarded: worktree removed, branch deleted.{by}")
        return "Discarded."

    async def _after_run(self, c: ChatSession, task: Task, status: str, cost: float) -> None:
        if task.source == "resolve":
            await self._ask_again(c, task.user_id)

    async def _ask_again(self, c: ChatSession, user_id: int) -> None:
        """After a Resolve session: offer Merge again."""
        b = await self.services.state.branch(c.chat_id, c.branch)
        if b is None:
            return
        merge_again = await self._button(b, user_id, "merge")
        with contextlib.suppress(TelegramError):
            await self.services.sender.send(
                c.chat_id,
                f"🛠 {b.branch}: the resolve session ended. Merge into {b.base} now?",
                html_text=False,
                buttons=[[("🔀 Merge", merge_again)]],
            )

    async def _say(self, chat_id: int, text: str) -> None:
        await self.services.sender.send(chat_id, text, html_text=False)
