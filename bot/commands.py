"""The chat's slash commands: memory in chat (/recall, /remember, /facts, /rules, /handoffs, /memory, /graph),
/cost, /help, and the session commands (/new, /sessions, /project, /stop, /status, /rpa) that
:mod:`bot.sessions` carries out.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from telegram import BotCommand

from bot.branch_desk import BranchDesk
from bot.chat_controls import ChatControls
from bot.memory_pages import MemoryPages
from bot.progress import escape, format_usage
from bot.project_memory import ProjectMemory
from bot.schedule_commands import ScheduleCommands
from bot.services import Services
from bot.session_list import SessionList
from bot.sessions import SessionManager
from bot.spend_caps import cost_lines
from bot.telegram_format import brief
from bot.voice.spoken_replies import SpokenReplies
from memory import MemoryStoreError
from relay.grounding import ensure_rules_file
from relay.ledger import MEMORY_ENGINE, SESSION_ENGINES

__all__ = ["COMMANDS", "Commands", "bot_commands"]

logger = logging.getLogger(__name__)

COMMANDS: tuple[tuple[str, str], ...] = (
    ("new", "Start a fresh session (grounded in memory): /new [@BRANCH]"),
    ("branches", "Every branch's worktree: diff, merge, discard, continue"),
    ("sessions", "Recent sessions of this project; tap one to continue it"),
    ("project", "Show or switch the project folder: /project NAME"),
    ("stop", "Interrupt the running sessions and drop what waits: /stop [@BRANCH]"),
    ("status", "What runs and what waits"),
    ("recall", "Search memory: /recall QUERY"),
    ("remember", "Store a fact: /remember TEXT"),
    ("facts", "The facts injected into new sessions"),
    ("rules", "The standing rules (MEMORY.md)"),
    ("handoffs", "Recent session handoffs"),
    ("memory", "This project's memory: /memory on | off | status | open (the memory pages)"),
    ("graph", "The facts graph as a picture: /graph [ROOT]"),
    ("cost", "Tokens and cost so far"),
    ("speak", "Answers as voice notes too: /speak on | off | voice (only for voice notes) | status"),
    ("rpa", "Research → Plan → Audit → execute: /rpa [@BRANCH] TASK"),
    ("at", "Run later, unattended: /at 18:30 | 30m | tomorrow 9:00 [@BRANCH] [profile=P] TEXT"),
    ("every", "Run on a schedule: /every weekday 09:00 | 2h | CRON [@BRANCH] [profile=P] [budget=USD] TEXT"),
    ("schedules", "Schedules: next run, last result; pause, run now, delete"),
    ("roles", "Who holds which role in a team room"),
    ("role", "The owner's: /role @user approver | member | viewer | none"),
    ("key", "The owner's: a memory-service API key, shown once: /key [read|write]"),
    ("keys", "The owner's: the memory service's keys, with Revoke buttons"),
    ("help", "What this bot does"),
)

HELP = (
    "Send an instruction as text or a voice note (photos and files too, with or without a caption): it goes "
    "to this chat's Claude Code session.\n"
    'Short follow-ups ("removed; push") continue the same session; while it runs they are queued.\n'
    "Agents in parallel: “@fix-login make the test pass” runs in branch fix-login's own git worktree, beside "
    "the others (a new branch starts from the main checkout's branch). Replying to a session's message "
    "continues it; a short follow-up goes to the session you last talked to; in a forum group each branch "
    "has its topic. Spoken: “branch fix login: make the test pass”. /branches to diff, merge or discard.\n"
    'A voice note while a prompt waits answers it: "allow", "deny", "allow for this session"; "yes" or '
    '"cancel" for a transcript; "keep" or "forget" for a handoff. Answers to voice notes are spoken too (/speak).\n\n'
    + "\n".join(f"/{name} — {text}" for name, text in COMMANDS)
)


def bot_commands() -> list[BotCommand]:
    return [BotCommand(name, text) for name, text in COMMANDS]


@dataclass(eq=False)  # a service object: equal only to itself, and hashable
class Commands:
    services: Services
    sessions: SessionManager
    controls: ChatControls
    branch_desk: BranchDesk
    schedules: ScheduleCommands
    spoken: SpokenReplies | None = None

    async def handle(self, name: str, args: str, chat_id: int, user_id: int) -> None:
        s = self.services
        name = name.lower()
        if name == "rpa":
            routed = await self.sessions.router.route(chat_id, args.strip(), now=time.time()) if args.strip() else ""
            if isinstance(routed, str):
                await s.sender.send(chat_id, routed or "Usage: /rpa [@BRANCH] TASK", html_text=False)
                return
            await self.sessions.submit(chat_id, user_id, routed.text, "rpa", branch=routed.branch)
            return
        if name == "branches":
            await self.branch_desk.show(chat_id, user_id)
            return
        if name in ("at", "every", "schedules"):
            await self.schedules.command(name, args, chat_id, user_id)
            return
        if name == "memory" and args.strip().lower() in ("", "open"):  # the status, with the pages' button
            await MemoryPages(s).memory(chat_id, args.strip().lower())
            return
        if name == "graph":
            await MemoryPages(s).graph(chat_id, args)
            return
        if name == "speak" and self.spoken is not None:
            await s.sender.send(chat_id, await self.spoken.command(chat_id, args), html_text=False)
            return
        if name == "sessions":  # its Continue buttons are the presser's: it needs the user
            await SessionList(s, self.controls.continue_session).show(chat_id, user_id)
            return
        reply = await self._reply(name, args.strip(), chat_id)
        if reply is not None:
            await s.sender.send(chat_id, reply)

    async def _reply(self, name: str, args: str, chat_id: int) -> str | None:
        """HTML reply text, or None when the command sent its own messages."""
        sm = self.controls
        match name:
            case "start" | "help":
                return escape(HELP)
            case "new":
                return escape(await sm.new(chat_id, args))
            case "project":
                return escape(await sm.switch_project(chat_id, args))
            case "stop":
                return escape(await sm.stop(chat_id, args))
            case "status":
                return escape(await sm.status(chat_id))
            case "recall":
                return await self.recall(args, chat_id)
            case "remember":
                return await self.remember(chat_id, args)
            case "facts":
                return await self.facts()
            case "rules":
                await self.rules(chat_id)
                return None
            case "handoffs":
                return await self.handoffs(chat_id)
            case "memory":
                return await ProjectMemory(self.services).command(chat_id, args)
            case "cost":
                return await self.cost()
        return escape(f"Unknown command /{brief(name, 40)}. Try /help.")

    async def recall(self, query: str, chat_id: int) -> str:
        """The same retrieval the agents' ``eywa_get`` runs, then full-text hits, with dates. Other private
        projects' sessions are left out (the chat's own project's are shown, private or not)."""
        s = self.services
        if not query:
            return "Usage: /recall QUERY"
        folder = (await s.project_of(chat_id)).path
        try:
            grounding = await s.eywa.get(query, viewer=folder)
            hits = [] if grounding.results else await s.eywa.search(query, limit=5, viewer=folder)
        except MemoryStoreError as exc:
            return escape(f"Memory is unavailable: {exc}")
        if grounding.results:
            lines = [f"🔎 <b>{escape(brief(query))}</b>"]
            for r in grounding.results:
                lines.append(f"• {escape(r.date[:10])} — {escape(r.headline)} <i>({escape(r.session_id[:8])})</i>")
            return "\n".join(lines)
        if hits:
            lines = [f"🔎 <b>{escape(brief(query))}</b> (full text)"]
            for h in hits:
                lines.append(f"• <i>{escape(h.session_id[:8])}</i>: {escape(' '.join(h.snippet.split())[:200])}")
            return "\n".join(lines)
        return escape(f"Nothing in memory matches {brief(query)!r}.")

    async def remember(self, chat_id: int, text: str) -> str:
        s = self.services
        if not text:
            return "Usage: /remember TEXT"
        if s.facts is None:
            return "The facts store is not available."
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        mid = f"tg-{int(time.time() * 1000)}-{secrets.token_hex(2)}"
        fields = {"predicate": "said", "object": " ".join(text.split())}
        try:
            await s.facts.remember(mid, "user", "Fact", fields, provenance=f"telegram chat {chat_id}, {today}")
        except MemoryStoreError as exc:  # FactsError included
            return escape(f"Could not store it: {exc}")
        return escape(f"🧠 Remembered ({mid}).")

    async def facts(self) -> str:
        lines = await self.services.facts_lines()
        if not lines:
            return "No facts yet. Add one with /remember TEXT."
        return "🧠 <b>Injected into new sessions</b>\n" + "\n".join(escape(line) for line in lines)

    async def rules(self, chat_id: int) -> None:
        s = self.services
        path = await asyncio.to_thread(ensure_rules_file, s.relay.rules_path)
        text = await asyncio.to_thread(path.read_text, encoding="utf-8")
        await s.sender.send(chat_id, f"📜 <b>Standing rules</b> <i>({escape(str(path))})</i>")
        await s.sender.send_markdown(chat_id, text, document_threshold=s.tuning.document_threshold)

    async def handoffs(self, chat_id: int) -> str:
        s = self.services
        rows = await s.eywa.list_handoffs(limit=30)
        hidden = await s.eywa.hidden_from((await s.project_of(chat_id)).path, [h.session_id for h in rows])
        rows = [h for h in rows if h.session_id not in hidden][:10]
        if not rows:
            return "No handoffs yet."
        lines = ["📒 <b>Recent handoffs</b>"]
        for h in rows:
            review = await s.state.get_review(h.session_id)
            mark = f" [{review.state}]" if review is not None else ""
            lines.append(f"• {escape(h.date[:10])} — {escape(h.headline)} <i>({escape(h.session_id[:8])}){mark}</i>")
        return "\n".join(lines)

    async def cost(self) -> str:
        """Sessions' spend (Claude, Codex) and memory's own (handoff extraction) apart, then the top sessions."""
        s = self.services
        name = s.roles.name if s.roles is not None else None
        caps = await cost_lines(self.sessions.spend, name)  # today's spend against each cap, per project and schedule
        if s.ledger is None or not await s.ledger.available():
            return "\n".join([*caps, "No cost ledger yet."])
        engines = await s.ledger.totals("engine")
        if not engines:
            return "\n".join([*caps, "Nothing spent yet."])
        lines = [*caps, "💰 <b>Cost</b>"]
        for t in engines:
            if t.key != MEMORY_ENGINE:
                lines.append(f"• {escape(t.key)}: {t.runs} runs · {escape(format_usage(t.tokens, t.cost_usd))}")
        memory = next((t for t in engines if t.key == MEMORY_ENGINE), None)
        if memory is not None:
            m = s.settings.memory
            today = await s.ledger.memory_spent_today(m.timezone)
            cap = f" of ${m.memory_daily_budget_usd:.2f}" if m.memory_daily_budget_usd is not None else ""
            usage = escape(format_usage(memory.tokens, memory.cost_usd))
            lines.append("<b>Memory</b> (handoff extraction)")
            lines.append(f"• {memory.runs} calls · {usage} · today ${today:.4f}{cap}")
        sessions = (await s.ledger.totals("session", engines=SESSION_ENGINES))[:5]
        if sessions:
            lines.append("<b>Top sessions</b>")
            lines += [f"• {escape(t.key[:8])}: {escape(format_usage(t.tokens, t.cost_usd))}" for t in sessions]
        return "\n".join(lines)
