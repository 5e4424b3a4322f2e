"""Every update's way in: the gatekeeper, then a claim in BotState, and only then the acknowledgement.

Long polling is our own loop over ``getUpdates`` rather than PTB's Updater, because the Updater confirms a
batch (by asking for the next offset) before the application has seen it: here each update of a batch is
gated and claimed (stored, unique by update id) before the next ``getUpdates`` confirms the batch, so a crash
at any point loses nothing and a redelivery is never handled twice. A stranger's update costs no database
write: it gets at most one short refusal per chat per window and never reaches a handler.

Admitted updates are handled one at a time per chat, in arrival order; chats run in parallel.

An album (messages sharing a ``media_group_id``: Telegram sends each photo or file of a multi-select as its
own message) is handled as one: its first message takes the chat's turn, then waits until no further part
has come for :data:`ALBUM_GAP_S` (at most :data:`ALBUM_MAX_S` in all, :data:`ALBUM_MAX_PARTS` parts), and the
parts go to ``route_album`` together. Parts stay "received" in bot.db until then, so a restart in the window
handles them again, as one album.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

from telegram import Update
from telegram.error import Forbidden, InvalidToken, NetworkError, TelegramError, TimedOut
from telegram.warnings import PTBUserWarning

from bot.auth import REFUSAL_TEXT, Gatekeeper, UpdateOrigin, Verdict, describe_update_origin
from bot.roles import sender_of
from bot.services import Services

__all__ = ["ALBUM_GAP_S", "ALBUM_MAX_PARTS", "ALBUM_MAX_S", "ALLOWED_UPDATES", "AlbumRoute", "Intake", "Route"]

logger = logging.getLogger(__name__)

Route = Callable[[Update], Awaitable[None]]
AlbumRoute = Callable[[list[Update]], Awaitable[None]]
# Only what the bot acts on: Telegram then never stores other kinds (polls, joins, reactions) for us.
ALLOWED_UPDATES: tuple[str, ...] = ("message", "edited_message", "callback_query")
_MAX_BACKOFF_S = 30.0
# Telegram delivers an album's parts within a second or so of each other; 10 is its most parts.
ALBUM_GAP_S = 1.5
ALBUM_MAX_S = 8.0
ALBUM_MAX_PARTS = 10


class _Album:
    def __init__(self, first: Update) -> None:
        self.updates = [first]
        self.grew = asyncio.Event()
        self.closed = False

    def add(self, update: Update) -> None:
        self.updates.append(update)
        self.grew.set()

    async def settle(self) -> None:
        """Return once no part came for ALBUM_GAP_S, the album is full, or ALBUM_MAX_S passed (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ALBUM_MAX_S
        while len(self.updates) < ALBUM_MAX_PARTS:
            self.grew.clear()
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                async with asyncio.timeout(min(ALBUM_GAP_S, left)):
                    await self.grew.wait()
            except TimeoutError:
                return


_SALVAGE_TIMEOUT_S = 10.0
_MAX_ID = 2**63  # SQLite's integers; Telegram's ids fit in 52 bits
# The raw getUpdates of Intake._salvage is deliberate: Bot.get_updates is the call whose parsing failed.
warnings.filterwarnings("ignore", message=r"Please use 'Bot\.getUpdates'", category=PTBUserWarning)


def _is_id(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and -_MAX_ID <= value < _MAX_ID


def _malformed(update_id: object, origin: UpdateOrigin, data: dict[str, Any]) -> str:
    """Why an update cannot have come from Telegram and cannot be stored, or "" when it is fine."""
    if not _is_id(update_id) or not all(i is None or _is_id(i) for i in (origin.chat_id, origin.user_id)):
        return "an id that is not a 64-bit integer"
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError, TypeError):  # half a surrogate pair; a value JSON cannot hold
        return "content that is not valid Unicode JSON"
    return ""


class Intake:
    def __init__(
        self,
        services: Services,
        route: Route,
        *,
        route_album: AlbumRoute | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.services = services
        self.route = route
        self.route_album = route_album
        self._albums: dict[tuple[int, str], _Album] = {}
        roles = services.roles
        self.gate = Gatekeeper.from_settings(services.settings, admit=roles.admits if roles is not None else None)
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        self._chat_locks: dict[int, asyncio.Lock] = {}
        self.offset = 0
        self.admitted = 0
        self.refused = 0
        self.dropped = 0  # redeliveries and silently ignored strangers

    # -- admission ---------------------------------------------------------------------------------

    async def receive(self, update: Update) -> bool:
        """Gate and claim one update; dispatch it when it is new. True when it was dispatched."""
        data = update.to_dict()
        origin = describe_update_origin(data)
        if why := _malformed(update.update_id, origin, data):
            self.dropped += 1  # not something Telegram sends, and nothing bot.db could store
            logger.warning("dropped update %.40r: %s", update.update_id, why)
            return False
        if self.services.roles is not None:  # before the gate: a role given to @name needs the sender's name
            self.services.roles.observe(*sender_of(data))
        verdict = self.gate.verdict(origin, self._clock())
        if verdict is Verdict.REFUSE:
            self.refused += 1
            self._spawn(self._refuse(update, origin))
            return False
        if verdict is Verdict.IGNORE:
            self.dropped += 1
            return False
        claimed = await self.services.state.claim_update(
            update.update_id, origin.chat_id, origin.user_id, origin.kind, data
        )
        if not claimed:
            self.dropped += 1
            return False
        self.admitted += 1
        self.dispatch(update, origin.chat_id)
        return True

    async def _refuse(self, update: Update, origin: UpdateOrigin) -> None:
        sender = self.services.sender
        try:
            if update.callback_query is not None:
                await sender.answer_callback(update.callback_query.id, REFUSAL_TEXT)
            elif origin.chat_id is not None:
                await sender.bot.send_message(origin.chat_id, REFUSAL_TEXT)
        except TelegramError as exc:  # a stranger who blocked us, a flood: never worth more than a log line
            logger.debug("refusal to %s not delivered: %s", origin.chat_id, exc)

    # -- handling ----------------------------------------------------------------------------------

    def dispatch(self, update: Update, chat_id: int | None) -> None:
        """Handle a claimed update in the background, after the chat's earlier updates."""
        key = chat_id if chat_id is not None else 0
        lock = self._chat_locks.get(key)
        if lock is None:
            lock = self._chat_locks[key] = asyncio.Lock()
        group = update.message.media_group_id if update.message is not None else None
        if group is None or self.route_album is None:
            self._spawn(self._handle(update, lock))
            return
        album = self._albums.get((key, group))
        if album is not None and not album.closed and len(album.updates) < ALBUM_MAX_PARTS:
            album.add(update)  # the first part's task routes it
            return
        album = self._albums[(key, group)] = _Album(update)
        self._spawn(self._handle_album(album, (key, group), lock))

    async def _handle(self, update: Update, lock: asyncio.Lock) -> None:
        state = self.services.state
        async with lock:  # acquired first thing: tasks start in creation order, so a chat keeps its order
            await state.mark_update(update.update_id, "handling")
            try:
                await self.route(update)
            except asyncio.CancelledError:
                raise  # shutdown or crash: stays "handling", reported (not re-run) at the next start
            except Exception:
                logger.exception("update %s failed", update.update_id)
                await state.mark_update(update.update_id, "failed")
                return
            await state.mark_update(update.update_id, "done")

    async def _handle_album(self, album: _Album, key: tuple[int, str], lock: asyncio.Lock) -> None:
        state = self.services.state
        assert self.route_album is not None
        async with lock:  # the album takes the chat's turn at its first part, so what follows waits for it
            await album.settle()
            album.closed = True
            if self._albums.get(key) is album:
                del self._albums[key]
            ids = [u.update_id for u in album.updates]
            for uid in ids:
                await state.mark_update(uid, "handling")
            try:
                await self.route_album(list(album.updates))
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("album of updates %s failed", ids)
                for uid in ids:
                    await state.mark_update(uid, "failed")
                return
            for uid in ids:
                await state.mark_update(uid, "done")

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        """Wait until every dispatched update has been handled (tests and benchmarks)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self, grace_s: float = 5.0) -> None:
        """Let running handlers finish within ``grace_s`` (most take milliseconds), then cancel the rest."""
        tasks = list(self._tasks)
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace_s)
        for t in late:
            t.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    # -- long polling ------------------------------------------------------------------------------

    async def poll(self) -> None:
        """getUpdates forever; every update of a batch is claimed before the next call confirms the batch."""
        bot = self.services.sender.bot
        timeout = self.services.tuning.poll_timeout_s
        backoff = 0.5
        while True:
            try:
                updates = await bot.get_updates(
                    offset=self.offset or None, timeout=int(timeout), allowed_updates=list(ALLOWED_UPDATES)
                )
            except (InvalidToken, Forbidden):
                raise  # a revoked token will not heal by retrying
            except (TimedOut, NetworkError) as exc:
                logger.warning("getUpdates failed (%s); retrying in %.1f s", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
                continue
            except TelegramError:
                raise
            except Exception:  # PTB could not read the batch: one malformed update fails them all
                logger.exception("getUpdates sent updates python-telegram-bot cannot read; reading them one by one")
                before = self.offset
                updates = await self._salvage()
                if not updates and self.offset == before:  # nothing could be read or confirmed: do not spin
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF_S)
                    continue
            backoff = 0.5
            for update in updates:
                await self.receive(update)
                if _is_id(update.update_id):
                    self.offset = max(self.offset, update.update_id + 1)

    async def _salvage(self) -> tuple[Update, ...]:
        """The batch PTB could not read, fetched raw (no long poll) and read update by update: one it cannot
        read is dropped and confirmed, so it is never fetched again; the others go on as usual."""
        bot = self.services.sender.bot
        params: dict[str, Any] = {"timeout": 0, "allowed_updates": list(ALLOWED_UPDATES)}
        if self.offset:
            params["offset"] = self.offset
        raw = await bot.do_api_request("getUpdates", api_kwargs=params, read_timeout=_SALVAGE_TIMEOUT_S)
        out: list[Update] = []
        for item in raw if isinstance(raw, list) else ():
            try:
                update = Update.de_json(item, bot)
            except Exception:  # whatever PTB raises on a malformed update: that update only
                update = None
                logger.exception("dropped an update python-telegram-bot cannot read")
            if update is not None:
                out.append(update)
                continue
            self.dropped += 1
            uid = item.get("update_id") if isinstance(item, dict) else None
            if _is_id(uid):
                self.offset = max(self.offset, uid + 1)
        return tuple(out)

    async def close_poll(self) -> None:
        """Confirm what was claimed, so a restart is not sent it again (harmless either way: claims dedupe)."""
        if not self.offset:
            return
        with contextlib.suppress(TelegramError):
            await self.services.sender.bot.get_updates(offset=self.offset, timeout=0, limit=1)
