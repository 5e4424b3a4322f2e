"""Memory you can see, from the chat: ``/memory`` (and ``/memory open``) opens the memory pages as a Telegram
Mini App, ``/graph [ROOT]`` sends the facts graph as a picture.

The pages are served by ``macupos serve --local`` (the owner's memory, on 127.0.0.1 behind the owner's
HTTPS proxy at ``MACUPOS_PUBLIC_URL``), which logs the owner in with Telegram's signed initData: the bot
itself serves no HTTP. The graph is the web page's drawing (memory/facts/graph.py) as a PNG.
"""

from __future__ import annotations

import asyncio
import logging
import time

from telegram.error import TelegramError

from bot.progress import escape
from bot.project_memory import ProjectMemory
from bot.services import Services
from memory import MemoryStoreError
from memory.facts import FactsApi

__all__ = ["MemoryPages"]

logger = logging.getLogger(__name__)

_OPEN = "📒 Memory: search, sessions, handoffs to review, facts and their graph, cost."
_HOW = (
    "The memory pages open here once MACUPOS_PUBLIC_URL is set: an https:// address that reaches "
    "`macupos serve --local` (see docs/web.md), then restart the bot."
)
_ROOT_CHARS = 200


class MemoryPages:
    def __init__(self, services: Services) -> None:
        self.services = services

    def _pages_url(self) -> str:
        url = self.services.settings.public_url
        return f"{url}/tg" if url else ""

    async def memory(self, chat_id: int, word: str) -> None:
        """``/memory`` (this project's memory status, with the pages' button) or ``/memory open``."""
        s = self.services
        url = self._pages_url()
        text = await ProjectMemory(s).command(chat_id, "") if word == "" else _OPEN
        if not url:
            await s.sender.send(chat_id, text if word == "" else escape(_HOW))
            return
        if chat_id < 0:  # Telegram opens a Mini App button only in the private chat with the bot
            await s.sender.send(chat_id, text + "\n" + escape("The memory pages open from the private chat with me."))
            return
        await s.sender.send_web_app(chat_id, text, "📒 Open memory", url)

    async def graph(self, chat_id: int, root: str) -> None:
        """The facts graph from ``root`` (or every fact) as a PNG: at most ~40 nodes drawn, the rest counted."""
        from memory.facts import build_graph, graph_png  # numpy, Pillow and the drawing only when one is asked for

        s = self.services
        root = " ".join(root.split())[:_ROOT_CHARS]
        if s.facts is None:
            await s.sender.send(chat_id, "The facts store is not available.", html_text=False)
            return
        if not isinstance(s.facts, FactsApi):
            text = "The facts live in the memory service: its pages (macupos serve) draw the graph."
            await s.sender.send(chat_id, text, html_text=False)
            return
        try:
            memories = await s.facts.all_memories()
        except MemoryStoreError as exc:
            await s.sender.send(chat_id, f"Memory is unavailable: {exc}", html_text=False)
            return
        graph = build_graph(memories, root=root, now_ms=int(time.time() * 1000))
        if graph.empty:
            where = f" from {root!r}" if root else ""
            await s.sender.send(chat_id, f"No facts to draw{where}. Add one with /remember TEXT.", html_text=False)
            return
        title = f"Facts graph: {root}" if root else "Facts graph"
        png = await asyncio.to_thread(graph_png, graph, title=title)
        caption = f"{title} · {len(graph.nodes)} nodes"
        if graph.hidden_nodes:
            caption += f" (+{graph.hidden_nodes} not drawn)"
        try:
            await s.sender.photo(chat_id, png, caption)
        except TelegramError as exc:
            logger.warning("could not send the facts graph: %s", exc)
            await s.sender.send(chat_id, f"Could not send the graph: {exc}", html_text=False)
