"""What the bot's parts share once it runs: settings, the durable state, memory, the sender and the engines.

Built and closed by :mod:`bot.app` (the composition root); every other module receives it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from bot.progress import DOCUMENT_THRESHOLD, Sender
from bot.roles import RoleBook
from bot.settings import BotSettings, Project
from bot.state import BotState
from bot.voice.transcribe import Transcriber
from memory import Facts, Memory, MemoryStoreError, StorageError
from relay.codex import CodexEngine
from relay.ledger import Ledger
from relay.settings import RelaySettings

__all__ = ["Services", "Tuning"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Tuning:
    """Timings the owner rarely changes; tests shorten them."""

    session_idle_s: float = 600.0  # a live session waits this long for a follow-up, then ends (handoff posted)
    min_edit_interval_s: float = 1.5  # Telegram allows about one edit per second per chat
    heartbeat_s: float = 10.0  # the progress message's clock moves at least this often
    poll_timeout_s: float = 30.0  # getUpdates long poll
    document_threshold: int = DOCUMENT_THRESHOLD
    review_ttl_s: float = 7 * 86400.0
    resume_ttl_s: float = 2 * 86400.0


@dataclass(slots=True)
class Services:
    settings: BotSettings
    relay: RelaySettings
    state: BotState
    eywa: Memory
    facts: Facts | None
    ledger: Ledger | None
    codex: CodexEngine | None
    sender: Sender
    tuning: Tuning
    transcriber: Transcriber | None = None
    owns_transcriber: bool = True
    _transcriber_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    facts_fault: StorageError | None = None  # the facts store's last storage fault (its own connection)
    _faults_told: set[tuple[int, str]] = field(default_factory=set)  # (chat, fault kind) already told
    roles: RoleBook | None = None  # team rooms (bot.roles); set by bot.app once the state is open

    async def get_transcriber(self) -> Transcriber:
        """The Whisper model, created on the first voice note (loading happens off the loop, in the transcriber)."""
        async with self._transcriber_lock:
            if self.transcriber is None:
                s = self.settings
                self.transcriber = Transcriber(
                    s.whisper_model or None, backend=s.whisper_backend, temp_dir=self.tmp_dir, language=s.voice_language
                )
                self.owns_transcriber = True
            return self.transcriber

    @property
    def tmp_dir(self) -> Path:
        return self.settings.home / "tmp"

    async def project_of(self, chat_id: int) -> Project:
        chat = await self.state.chat(chat_id)
        return (self.settings.project(chat.project) if chat.project else None) or self.settings.default_project

    async def facts_lines(self) -> list[str]:
        if self.facts is None:
            return []
        try:
            return await self.facts.tiered_injection()
        except MemoryStoreError as exc:  # facts must never stop a session from starting
            logger.warning("facts injection failed: %s", exc)
            if isinstance(exc, StorageError):
                self.facts_fault = exc
            return []

    def storage_fault(self) -> StorageError | None:
        """The last storage fault memory met (damaged pages, a full disk…), or None."""
        return self.eywa.last_fault or self.facts_fault

    async def tell_storage_fault(self, chat_id: int) -> None:
        """Say a storage fault in the chat once (per kind), after the run it touched; runs go on without memory."""
        fault = self.storage_fault()
        if fault is None or (chat_id, fault.kind) in self._faults_told:
            return
        self._faults_told.add((chat_id, fault.kind))
        text = (
            f"⚠️ Memory is unavailable: {fault}\n"
            "Runs go on without it (no recalled handoffs or facts) until it is fixed and the bot restarted."
        )
        await self.sender.notice(chat_id, text, "about the memory fault")
