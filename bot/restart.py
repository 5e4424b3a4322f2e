"""What a previous process left, handled at start: nothing is re-run without the owner's word, nothing twice.

A run it cut gets a card with Resume / Dismiss (Resume runs it, then what waited behind it). An update it
stored but never started is handled now. One it cut is reported, a plain text instruction as a cut run so
that Resume runs it once. Instructions left waiting in a queue between two runs run now.

In a forum group a branch's card goes to the branch's topic, and a cut message written in a branch's topic
is the branch's (Telegram gives every topic message an implicit reply to the topic's first message: that
is not a reply).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from telegram import Update
from telegram.error import TelegramError

from bot.auth import is_allowed, quote_forwarded
from bot.errors import ChatBusyError
from bot.intake import Intake
from bot.lanes import LaneTag, in_lane, split_branch
from bot.progress import escape
from bot.records import Callback, Run, StoredUpdate
from bot.services import Services
from bot.sessions import SessionManager

__all__ = ["RESTART_ACTION", "Restart"]

logger = logging.getLogger(__name__)

RESTART_ACTION = "restart"
_HANDLED = "That run was already handled."


class Restart:
    def __init__(self, services: Services, intake: Intake, sessions: SessionManager) -> None:
        self.services = services
        self.intake = intake
        self.sessions = sessions

    async def recover(self) -> None:
        """Report runs a dead process left (Resume / Dismiss), handle stored-but-unstarted updates, report cut ones."""
        s = self.services
        # (chat, instruction) a card reports (a run, or waiting behind it) or the queue still holds. A lane's
        # rows hold the instruction without its "@branch" (see _recover_update).
        reported: set[tuple[int, str]] = set()
        for run in await s.state.interrupted_runs():
            waiting = await s.state.held(run.chat_id, run.branch)
            reported |= {(run.chat_id, run.instruction)} | {(run.chat_id, q.text) for q in waiting}
            await self._report_run(run, len(waiting))
        # Left in the queue of a lane whose run had ended (the process died between two, or while it waited
        # for a free slot): never started.
        queued_in = await s.state.lanes_with_queued()
        for chat_id, branch in queued_in:
            reported |= {(chat_id, q.text) for q in await s.state.queued(chat_id, branch)}
        for stored in await s.state.pending_updates():
            await self._recover_update(stored, reported)
        for chat_id, branch in queued_in:
            await self.sessions.run_queued(chat_id, self._owner(chat_id), branch)
        # Old update ids must not swallow new ones (Telegram restarts ids after a quiet week), and spent
        # buttons need not linger.
        await s.state.prune_updates()
        await s.state.prune_callbacks()
        await s.state.prune_lane_messages()  # a reply to a message over 30 days old goes by the other rules
        await s.state.prune_deliveries()  # GitHub redelivers for days, not months

    def _owner(self, chat_id: int) -> int:
        """Who acts for a chat: the user of a private chat, else the first allowed user."""
        allowed = self.services.settings.allowed_users
        return chat_id if chat_id in allowed else min(allowed)

    async def _report_run(self, run: Run, waiting: int) -> None:
        s = self.services
        owner = self._owner(run.chat_id)
        ttl = s.tuning.resume_ttl_s
        group = f"restart-{run.id}"
        resume = await s.state.new_callback(
            run.chat_id, owner, RESTART_ACTION, {"op": "resume", "run": run.id}, ttl, group=group
        )
        dismiss = await s.state.new_callback(
            run.chat_id, owner, RESTART_ACTION, {"op": "dismiss", "run": run.id}, ttl, group=group
        )
        where = f" in branch {escape(run.branch)}" if run.branch else ""
        thread = None
        if run.branch and (known := await s.state.branch(run.chat_id, run.branch)) is not None:
            thread = known.thread_id
        text = (
            f"⚠️ I was restarted while working{where} on:\n<i>{escape(run.instruction[:500])}</i>\n"
            f"(session {escape(run.session_id[:8] or 'not started')}). Nothing has been re-run."
        )
        if waiting:
            text += f"\n{waiting} more instruction(s) were waiting; Resume runs them after it."
        try:
            with in_lane(LaneTag(run.chat_id, run.branch, thread)):  # a branch's card goes to its forum topic
                await s.sender.send(run.chat_id, text, buttons=[[("▶️ Resume", resume), ("✖️ Dismiss", dismiss)]])
        except TelegramError as exc:
            logger.warning("could not report the interrupted run %s: %s", run.id, exc)
            return  # not marked: the next start sends its card
        await s.state.mark_reported(run.id)

    async def _recover_update(self, stored: StoredUpdate, reported: set[tuple[int, str]]) -> None:
        s = self.services
        if stored.user_id is not None and not is_allowed(s.settings, stored.user_id):
            await s.state.mark_update(stored.update_id, "failed")  # removed from the allowlist meanwhile
            return
        if stored.status == "received":
            update = Update.de_json(stored.payload, s.sender.bot)
            self.intake.dispatch(update, stored.chat_id)
            return
        await s.state.mark_update(stored.update_id, "interrupted")
        if stored.chat_id is None:
            return
        message = stored.payload.get("message") or {}
        instruction = quote_forwarded(message)
        # Queued or run as routed: "@four do it" is held as "do it" in lane four.
        if {(stored.chat_id, instruction), (stored.chat_id, split_branch(instruction)[1])} & reported:
            return  # cut after it was queued or started: a card above reports it, and its Resume runs it
        if await self._report_as_run(stored.chat_id, message, instruction):
            return
        what = str(message.get("text") or message.get("caption") or _kind_of(message))
        thread = _topic(message)
        branch = await s.state.branch_of_thread(stored.chat_id, thread) if thread is not None else None
        try:
            with in_lane(LaneTag(stored.chat_id, branch.branch if branch else "", thread)):  # where it was written
                await s.sender.send(
                    stored.chat_id,
                    f"⚠️ I stopped while handling {what[:300]!r}; it was not finished and is not re-run. "
                    "Send it again if you still want it.",
                    html_text=False,
                )
        except TelegramError as exc:
            logger.warning("could not report the cut update %s: %s", stored.update_id, exc)

    async def _report_as_run(self, chat_id: int, message: dict[str, Any], instruction: str) -> bool:
        """A text instruction cut before it was queued or run: reported as a cut run, so Resume runs it once.
        Commands, voice, files and replies (a correction, perhaps) are only reported."""
        s = self.services
        thread = _topic(message)
        replied = message.get("reply_to_message")
        # In a forum topic every message replies (implicitly) to the topic's first message: not a real reply.
        replies = isinstance(replied, dict) and (thread is None or replied.get("message_id") != thread)
        plain = message.get("text") and not replies and not str(message["text"]).startswith("/")
        if not plain or (await s.state.chat(chat_id)).pending_correction:
            return False
        # Routed as it would have been ("@fix-login …", a branch's topic, a terse follow-up), so Resume runs it
        # in its lane; a name git refuses is only reported.
        routed = await self.sessions.router.route(
            chat_id,
            instruction,
            thread_id=thread,
            forum=bool((message.get("chat") or {}).get("is_forum")),
            now=time.time(),
        )
        if isinstance(routed, str):
            return False
        project = await s.project_of(chat_id)
        try:
            run_id = await s.state.start_run(chat_id, routed.text, "", project.name, branch=routed.branch)
        except ChatBusyError:  # a stored update dispatched above already runs in this chat
            return False
        await s.state.finish_run(run_id, "interrupted")
        run = await s.state.get_run(run_id)
        if run is not None:
            await self._report_run(run, 0)
        return run is not None

    async def on_callback(self, callback: Callback, message_id: int | None) -> str:
        """The card's Resume or Dismiss, tapped (or said): the card loses its buttons either way."""
        run_id = int(callback.payload.get("run", 0))
        if callback.payload.get("op") == "resume":
            toast = await self._resume(callback.chat_id, callback.user_id, run_id)
        else:
            toast = await self._dismiss(callback.chat_id, run_id)
        if message_id is not None:
            with contextlib.suppress(TelegramError):
                await self.services.sender.bot.edit_message_reply_markup(
                    callback.chat_id, message_id, reply_markup=None
                )
        return toast

    async def _still_cut(self, run_id: int) -> Run | None:
        """The run, if it still waits for Resume or Dismiss (a card's other button may have been pressed)."""
        run = await self.services.state.get_run(run_id)
        return run if run is not None and run.status == "interrupted" else None

    async def _resume(self, chat_id: int, user_id: int, run_id: int) -> str:
        """The owner pressed Resume on an interrupted run: continue its session with a note, then the queue."""
        s = self.services
        run = await self._still_cut(run_id)
        if run is None:
            return _HANDLED
        await s.state.finish_run(run_id, "resumed")
        await s.state.release_held(chat_id, "queued", run.branch)
        if run.branch and await s.state.branch(chat_id, run.branch) is None:
            return f"Branch {run.branch} was discarded meanwhile."
        if run.session_id:
            await self.sessions.set_session(self.sessions.chat(chat_id, run.branch), run.session_id)
        note = (
            "The bot was restarted while you were working on my instruction below. Check what was already done, "
            f"then continue where you left off.\n\n{run.instruction}"
        )
        await self.sessions.submit(chat_id, user_id, note, "resume", branch=run.branch)
        return "Resuming."

    async def _dismiss(self, chat_id: int, run_id: int) -> str:
        s = self.services
        if await self._still_cut(run_id) is None:
            return _HANDLED
        run = await s.state.get_run(run_id)
        await s.state.finish_run(run_id, "dismissed")
        await s.state.release_held(chat_id, "cancelled", run.branch if run is not None else "")
        return "Dismissed."


def _topic(message: dict[str, Any]) -> int | None:
    """The forum topic a stored message was written in (as bot.dispatch.topic_of)."""
    thread = message.get("message_thread_id")
    return thread if message.get("is_topic_message") and isinstance(thread, int) else None


def _kind_of(message: dict[str, Any]) -> str:
    """How a stored message without text is named in a report ("a voice note", "a photo" …)."""
    for key, name in (("voice", "a voice note"), ("photo", "a photo"), ("document", "a file")):
        if message.get(key):
            return name
    return "an update"
