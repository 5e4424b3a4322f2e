"""``/key [read|write]`` and ``/keys`` (the owner's): API keys of the owner's tenant on the configured memory
service (MACUPOS_MEMORY_URL), issued and revoked through its ``/v1/keys`` routes with the bot's own key,
which must be an admin key (MACUPOS_API_KEY).

A new key is shown once, in the owner's private chat, in a message deleted after :data:`KEY_SHOWN_S`. The
deletion is kept in bot.db (``timed_deletions``) and done by :meth:`KeyDesk.sweep`, so a restart in between
still deletes it; :meth:`KeyDesk.run` is the loop the bot runs (tests call ``sweep`` with their own clock).

Plain HTTP through httpx: the bot never imports the service package.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from telegram.error import TelegramError

from bot.errors import BotError
from bot.progress import escape
from bot.records import Callback
from bot.roles import DECIDER
from bot.services import Services

__all__ = ["KEYS_ACTION", "KEY_SHOWN_S", "KeyDesk"]

logger = logging.getLogger(__name__)

KEYS_ACTION = "keys"
KEY_SHOWN_S = 600.0
_BUTTON_TTL_S = 3600.0
_MAX_WAIT_S = 60.0
_ADMIN_FIX = (
    "The bot's MACUPOS_API_KEY is not an admin key, so it cannot issue or list keys. Make one on the server with "
    "`macupos serve keys create --tenant NAME --scope admin`, put it in MACUPOS_API_KEY and restart the bot."
)


class KeysError(BotError):
    """The service refused or could not be reached; the text is for the owner (never holds a key)."""


@dataclass(eq=False)
class KeyDesk:
    services: Services
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self._wake = asyncio.Event()

    # -- HTTP ------------------------------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        m = self.services.settings.memory
        if not m.memory_url:
            raise KeysError(
                "No memory service is configured (MACUPOS_MEMORY_URL): keys belong to a memory service "
                "(`macupos serve`). The local memory needs none."
            )
        try:
            async with httpx.AsyncClient(
                base_url=m.memory_url,
                headers={"X-API-Key": m.api_key, "User-Agent": "macupos-bot"},
                timeout=httpx.Timeout(20.0, connect=5.0),
                follow_redirects=False,  # a redirect would resend the admin key wherever it points
                trust_env=False,
            ) as http:
                response = await http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise KeysError(f"The memory service at {m.memory_url} did not answer ({type(exc).__name__}).") from None
        if response.status_code in (401, 403):
            raise KeysError(_ADMIN_FIX if response.status_code == 403 else "The service refused the bot's key "
                             "(unknown or revoked): check MACUPOS_API_KEY.")  # fmt: skip
        if response.status_code == 404 and method != "DELETE":
            raise KeysError("This memory service has no /v1/keys (update `macupos serve`).")
        return response

    # -- commands --------------------------------------------------------------------------------------

    async def command(self, name: str, args: str, chat_id: int, user_id: int) -> None:
        s = self.services
        try:
            if name == "key":
                await self.issue(args.strip().lower(), chat_id, user_id)
            else:
                await self.listing(chat_id, user_id)
        except KeysError as exc:
            await s.sender.send(chat_id, f"🔑 {exc}", html_text=False)

    async def issue(self, scope: str, chat_id: int, user_id: int) -> None:
        s = self.services
        scope = scope or "read"  # the least a key can do, unless asked
        if scope not in ("read", "write"):
            await s.sender.send(chat_id, "Usage: /key [read|write] (read when not said)", html_text=False)
            return
        label = f"telegram /key by {s.roles.name(user_id) if s.roles is not None else user_id}"
        response = await self._call("POST", "/v1/keys", {"scope": scope, "label": label})
        if response.status_code != 201:
            raise KeysError(f"The service did not issue a key (HTTP {response.status_code}).")
        made = response.json()
        # Shown in the owner's private chat only: a team room must not see it.
        private = s.settings.owner_id or chat_id
        text = (
            f"🔑 New <b>{escape(str(made.get('scope', scope)))}</b> key for tenant "
            f"<b>{escape(str(made.get('tenant', '')))}</b> (id {escape(str(made.get('id', '')))}):\n"
            f"<code>{escape(str(made.get('key', '')))}</code>\n"
            f"Shown once: this message is deleted in {KEY_SHOWN_S / 60:g} minutes. Copy it now. "
            "Use it as MACUPOS_API_KEY (with MACUPOS_MEMORY_URL) or X-API-Key. /keys lists and revokes."
        )
        shown = await s.sender.send(private, text)
        await s.state.delete_later(private, shown.message_id, self.clock() + KEY_SHOWN_S)
        self._wake.set()
        if private != chat_id:
            await s.sender.send(chat_id, "🔑 Sent to you in a private chat (shown once).", html_text=False)

    async def listing(self, chat_id: int, user_id: int) -> None:
        s = self.services
        response = await self._call("GET", "/v1/keys")
        if response.status_code != 200:
            raise KeysError(f"The service did not list the keys (HTTP {response.status_code}).")
        keys = [k for k in response.json().get("keys", []) if isinstance(k, dict)]
        live = [k for k in keys if not k.get("revoked_at")]
        if not live:
            await s.sender.send(chat_id, "🔑 No live keys. /key [read|write] makes one.", html_text=False)
            return
        tenant = str(live[0].get("tenant", ""))
        lines = [f"🔑 Keys of tenant {tenant} (the bot's own key is among them: revoking it cuts the bot off)"]
        buttons: list[list[tuple[str, str]]] = []
        for k in live[:20]:
            key_id, label = str(k.get("id", "")), str(k.get("label") or "")
            made = str(k.get("created_at", ""))[:10]
            lines.append(f"• #{key_id} {k.get('scope', '')}{f' «{label}»' if label else ''} {made}".rstrip())
            token = await s.state.new_callback(
                chat_id, user_id, KEYS_ACTION, {"op": "revoke", "id": key_id}, _BUTTON_TTL_S
            )
            buttons.append([(f"🗑 Revoke #{key_id}", token)])
        await s.sender.send(chat_id, "\n".join(lines), html_text=False, buttons=buttons)

    async def on_callback(self, callback: Callback, message_id: int | None) -> str:
        s = self.services
        if s.roles is not None and s.roles.role_of(callback.user_id) != "owner":
            return "Only the owner can revoke keys."
        key_id = str(callback.payload.get("id", ""))
        try:
            response = await self._call("DELETE", f"/v1/keys/{key_id}")
        except KeysError as exc:
            await s.sender.send(callback.chat_id, f"🔑 {exc}", html_text=False)
            return "It did not work."
        if response.status_code == 404:
            return "That key is gone already."
        if response.status_code != 204:
            return f"Not revoked (HTTP {response.status_code})."
        by = DECIDER.get()
        await s.sender.send(callback.chat_id, f"🗑 Key #{key_id} revoked{f' by {by}' if by else ''}.", html_text=False)
        return "Revoked."

    # -- shown-once messages ---------------------------------------------------------------------------

    async def sweep(self, now: float | None = None) -> int:
        """Delete the messages due by ``now``; returns how many were due."""
        s = self.services
        due = await s.state.due_deletions(self.clock() if now is None else now)
        for chat_id, message_id in due:
            try:
                await s.sender.bot.delete_message(chat_id, message_id)
            except TelegramError as exc:  # deleted by hand already, or too old for the bot: nothing left to do
                logger.info("could not delete message %s in %s: %s", message_id, chat_id, exc)
            await s.state.deleted(chat_id, message_id)
        return len(due)

    async def run(self, stop: asyncio.Event) -> None:
        """The loop the bot runs: sweep, then wait for the next due deletion (or a new one, or the stop)."""
        while not stop.is_set():
            self._wake.clear()  # before looking: a key shown during the look is kept for the wait below
            try:
                await self.sweep()
                due = await self.services.state.next_deletion()
            except Exception:  # the loop's boundary: one failed sweep must not end the deletions
                logger.exception("timed deletions failed")
                due = None
            wait = _MAX_WAIT_S if due is None else min(_MAX_WAIT_S, max(0.0, due - self.clock()))
            stopping = asyncio.ensure_future(stop.wait())
            woken = asyncio.ensure_future(self._wake.wait())
            await asyncio.wait({stopping, woken}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for f in (stopping, woken):
                f.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await f
