"""A Telegram Bot API double: a real HTTP server on 127.0.0.1 that the unmodified python-telegram-bot talks to.

Point the library at it with ``ApplicationBuilder().token(T).base_url(double.base_url)
.base_file_url(double.base_file_url)``; PTB then calls ``<base_url><token>/<method>`` and downloads
``<base_file_url><token>/<file_path>``. Parameters arrive form-encoded (JSON values for objects),
multipart when a file is uploaded, or as a JSON body; all three are accepted.

Tests push updates (``push_message``, ``push_voice``, ``push_callback`` …), read what the bot did
(``sent``, ``requests``, ``messages``) and wait for it with ``wait_for`` (a condition variable, no sleeps).
Forum supergroups and their topics (``make_forum``, createForumTopic, ``message_thread_id``) live in
``telegram_forum.py``, mixed in here.
Telegram's real limits are enforced: 4,096 characters per message after entity parsing, strict HTML
(see ``check_html``), 20 MB bot downloads, per-chat flood control with ``retry_after``, and
"message is not modified". ``check_html`` is stricter than Telegram about bare ``&`` and ``>``, so
what passes here passes there.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import json
import math
import re
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

from tests.doubles.loopback import serve
from tests.doubles.telegram_forum import ForumMixin

__all__ = [
    "MAX_CAPTION",
    "MAX_DOWNLOAD",
    "MAX_TEXT",
    "Call",
    "HtmlError",
    "StoredFile",
    "TelegramDouble",
    "check_html",
]

T = TypeVar("T")
MAX_TEXT = 4096
MAX_CAPTION = 1024
MAX_DOWNLOAD = 20 * 1024 * 1024  # getFile refuses bigger files for bots

_INT_FIELDS = frozenset(
    "chat_id message_id offset limit timeout user_id reply_to_message_id cache_time message_thread_id duration".split()
)
_BOOL_FIELDS = frozenset("disable_notification show_alert drop_pending_updates protect_content".split())
_JSON_FIELDS = frozenset(
    "reply_markup allowed_updates commands scope entities caption_entities link_preview_options "
    "reply_parameters".split()
)
# Methods that count against per-chat flood control.
_FLOOD_METHODS = frozenset(
    "sendMessage editMessageText editMessageReplyMarkup sendDocument sendPhoto sendVoice".split()
)
# Methods whose successful calls are the bot's visible actions (``sent``).
_READ_METHODS = frozenset("getMe getUpdates getFile getMyCommands getWebhookInfo deleteWebhook getChat".split())
_CHAT_ACTIONS = frozenset(
    "typing upload_photo record_video upload_video record_voice upload_voice upload_document "
    "choose_sticker find_location record_video_note upload_video_note".split()
)
_COMMAND = re.compile(r"^[a-z0-9_]{1,32}$")

# ---------------------------------------------------------------------------------------------
# Telegram HTML


class HtmlError(ValueError):
    """HTML that Telegram would refuse; the message is what follows "can't parse entities: "."""


_ALLOWED = frozenset("b strong i em u ins s strike del a code pre blockquote tg-spoiler span tg-emoji".split())
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#[0-9]+|#[xX][0-9a-fA-F]+);")
_ENTITY_TEXT = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_ATTR = re.compile(r"""\s+([a-zA-Z_:][-a-zA-Z0-9_:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")


def check_html(text: str) -> str:
    """Parse Telegram HTML strictly; return the visible text or raise HtmlError.

    Allowed: the tags of the Bot API's HTML style, balanced and properly nested; ``code`` with a
    ``class`` only directly inside ``pre``; nothing inside ``code``/``pre`` but that ``code``; no
    ``a`` in ``a`` or ``blockquote`` in ``blockquote``; ``&``, ``<`` and ``>`` in text escaped as
    ``&amp;`` ``&lt;`` ``&gt;`` (or ``&quot;`` / numeric entities).
    """
    out: list[str] = []
    stack: list[str] = []
    i = 0
    n = len(text)

    def at(pos: int) -> str:
        return f"at byte offset {len(text[:pos].encode())}"

    while i < n:
        ch = text[i]
        if ch == "&":
            m = _ENTITY.match(text, i)
            if not m:
                raise HtmlError(f"Unsupported HTML entity {at(i)}")
            name = m.group(1)
            if name.startswith("#"):
                code = int(name[2:], 16) if name[1] in "xX" else int(name[1:])
                if not 0 < code <= 0x10FFFF:
                    raise HtmlError(f"Invalid character code {at(i)}")
                out.append(chr(code))
            else:
                out.append(_ENTITY_TEXT[name])
            i = m.end()
        elif ch == ">":
            raise HtmlError(f'Character ">" is reserved and must be escaped {at(i)}')
        elif ch == "<":
            end = text.find(">", i)
            if end < 0:
                raise HtmlError(f"Unclosed start tag {at(i)}")
            i = _tag(text, i, end, stack, at)
        else:
            out.append(ch)
            i += 1
    if stack:
        raise HtmlError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


def _tag(text: str, start: int, end: int, stack: list[str], at: Callable[[int], str]) -> int:
    body = text[start + 1 : end]
    if body.startswith("/"):
        name = body[1:].strip().lower()
        if not stack or stack[-1] != name:
            expected = f'expected "</{stack[-1]}>"' if stack else "no tag is open"
            raise HtmlError(f'Unmatched end tag {at(start)}, {expected}, found "</{name}>"')
        stack.pop()
        return end + 1
    m = re.match(r"([a-zA-Z][a-zA-Z0-9-]*)", body)
    if not m:
        raise HtmlError(f"Unclosed start tag {at(start)}")
    name = m.group(1).lower()
    if name not in _ALLOWED:
        raise HtmlError(f'Unsupported start tag "{name}" {at(start)}')
    attrs: dict[str, str] = {}
    rest = body[m.end() :]
    pos = 0
    while pos < len(rest):
        a = _ATTR.match(rest, pos)
        if not a:
            if rest[pos:].strip():
                raise HtmlError(f'Empty attribute name in the tag "{name}" {at(start)}')
            break
        attrs[a.group(1).lower()] = next((g for g in a.groups()[1:] if g is not None), "")
        pos = a.end()
    parent = stack[-1] if stack else ""
    if parent == "code" or (parent == "pre" and name != "code"):
        raise HtmlError(f'Tag "{name}" is not allowed inside "{parent}" {at(start)}')
    if name in stack and name in ("a", "blockquote", "pre", "code"):
        raise HtmlError(f'Tag "{name}" can\'t be nested {at(start)}')
    if name == "a" and not attrs.get("href"):
        raise HtmlError(f'Tag "a" must have attribute "href" {at(start)}')
    if name == "span" and attrs.get("class") != "tg-spoiler":
        raise HtmlError(f'Tag "span" must have class "tg-spoiler" {at(start)}')
    if name == "code" and "class" in attrs and (parent != "pre" or not attrs["class"].startswith("language-")):
        raise HtmlError(f'Attribute "class" of tag "code" is allowed only inside "pre" {at(start)}')
    stack.append(name)
    return end + 1


# ---------------------------------------------------------------------------------------------
# The double


@dataclass(frozen=True, slots=True)
class StoredFile:
    file_id: str
    data: bytes
    size: int  # what Telegram reports; may exceed len(data) to stage an oversized upload cheaply
    path: str
    file_name: str = ""
    mime_type: str = ""


@dataclass(frozen=True, slots=True)
class Call:
    """One request the bot made: decoded parameters, uploaded files, and how the double answered."""

    method: str
    params: Mapping[str, Any]
    files: Mapping[str, StoredFile]
    status: int
    result: Any  # the ``result`` on success, the ``description`` on failure

    @property
    def ok(self) -> bool:
        return self.status == 200


class _ApiError(Exception):
    def __init__(self, status: int, description: str, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


def _bad(description: str) -> _ApiError:
    return _ApiError(400, f"Bad Request: {description}")


@dataclass(slots=True)
class _Chat:
    next_message_id: int = 1
    messages: dict[int, dict[str, Any]] = field(default_factory=dict)  # bot's messages, current state
    log: dict[int, dict[str, Any]] = field(default_factory=dict)  # every message, the users' too (for replies)
    sends: deque[float] = field(default_factory=deque)
    blocked_until: float = 0.0


class TelegramDouble(ForumMixin):
    """Use as ``async with TelegramDouble() as tg:``; see the module docstring."""

    def __init__(self, token: str = "123456:TEST-TOKEN", *, bot_id: int = 123456, username: str = "macupos_test_bot"):
        self.token = token
        self.bot_user = {"id": bot_id, "is_bot": True, "first_name": "Macupos", "username": username}
        self.requests: list[Call] = []
        self.files: dict[str, StoredFile] = {}
        self.commands: dict[tuple[str, str], list[dict[str, str]]] = {}
        self._chats: dict[int, _Chat] = defaultdict(_Chat)
        self._forums = {}  # chat id → forum (see make_forum)
        self._updates: dict[int, dict[str, Any]] = {}  # every update ever pushed
        self._pending: list[int] = []  # not yet confirmed by an offset
        self._again: list[int] = []  # forced redeliveries, regardless of offset
        self._deliveries: dict[int, int] = defaultdict(int)
        self._times = 1  # each update goes out at least this many times (see deliver_each)
        self._callbacks: dict[str, bool] = {}  # callback id → answered
        self._allowed: frozenset[str] = frozenset()
        self._ids = itertools.count(1)
        self._next_update = 1
        self._flood: int | None = None
        self.webhook: dict[str, Any] = {}  # the last setWebhook parameters
        self._retry_after = 1
        self._clock_offset = 0.0
        self._closing = False
        # A fresh Event per change: waiters re-check their condition whenever it fires (a condition
        # variable that can be notified from synchronous code such as the push_* methods).
        self._changed: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle ---

    async def __aenter__(self) -> TelegramDouble:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        self._changed = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner, self.port = await serve(app, shutdown_timeout=1.0)

    async def stop(self) -> None:
        self._closing = True
        self._wake()  # release long polls so the server can shut down at once
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        """The root the bot's ``MACUPOS_TELEGRAM_API_URL`` takes (it appends ``/bot<token>/…``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.api_url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.api_url}/file/bot"

    # --- test API: updates in ---

    def push_update(self, update: Mapping[str, Any]) -> dict[str, Any]:
        """Queue any update (``update_id`` assigned when missing) and wake long polls."""
        raw = dict(update)
        uid = int(raw.get("update_id") or self._next_update)
        raw["update_id"] = uid
        self._next_update = max(self._next_update, uid + 1)
        self._updates[uid] = raw
        bisect.insort(self._pending, uid)
        self._wake()
        return raw

    def _push_from(
        self, user_id: int, chat_id: int, fields: Mapping[str, Any], *, caption: str | None = None, **content: Any
    ) -> dict[str, Any]:
        """A user's message with ``content`` (and ``caption``, when given), the test's ``fields`` over it, queued in
        its topic."""
        message = self._user_message(user_id, chat_id, **content)
        if caption is not None:
            message["caption"] = caption
        message.update(fields)
        self._into_topic(message)
        return self.push_update({"message": message})

    def push_message(self, user_id: int, chat_id: int, text: str, **fields: Any) -> dict[str, Any]:
        content: dict[str, Any] = {"text": text}
        if text.startswith("/"):  # PTB's CommandHandler matches on the bot_command entity, as Telegram sends it
            command = text.split()[0]
            content["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
        return self._push_from(user_id, chat_id, fields, **content)

    def push_voice(
        self,
        user_id: int,
        chat_id: int,
        ogg_bytes: bytes,
        duration: int,
        *,
        file_size: int | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A voice note; ``file_size`` overrides the size Telegram reports (stage a > 20 MB note cheaply)."""
        f = self.add_file(ogg_bytes, folder="voice", ext="oga", size=file_size, mime_type="audio/ogg")
        voice = {"file_id": f.file_id, "file_unique_id": f"u{f.file_id}", "duration": duration}
        voice |= {"mime_type": "audio/ogg", "file_size": f.size}
        return self._push_from(user_id, chat_id, fields, voice=voice)

    def push_document(
        self,
        user_id: int,
        chat_id: int,
        data: bytes,
        file_name: str = "file.txt",
        mime_type: str = "text/plain",
        caption: str | None = None,
        *,
        file_size: int | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A file sent as a document; ``file_size`` overrides the size Telegram reports (stage > 20 MB cheaply)."""
        f = self.add_file(
            data,
            folder="documents",
            ext=file_name.rsplit(".", 1)[-1],
            size=file_size,
            name=file_name,
            mime_type=mime_type,
        )
        document: dict[str, Any] = {"file_id": f.file_id, "file_unique_id": f"u{f.file_id}", "file_name": file_name}
        document |= {"mime_type": mime_type, "file_size": f.size}
        return self._push_from(user_id, chat_id, fields, caption=caption, document=document)

    def push_photo(
        self,
        user_id: int,
        chat_id: int,
        jpeg: bytes,
        caption: str | None = None,
        *,
        file_size: int | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A photo as Telegram sends it: several sizes, smallest first; the last (largest) carries ``jpeg``.

        The thumbnail's bytes are not ``jpeg``, so a bot that takes the wrong size is caught.
        """
        thumb = self.add_file(b"thumbnail of " + jpeg[:16], folder="photos", ext="jpg")
        full = self.add_file(jpeg, folder="photos", ext="jpg", size=file_size)
        sizes = [
            {"file_id": f.file_id, "file_unique_id": f"u{f.file_id}", "width": w, "height": h, "file_size": f.size}
            for f, w, h in ((thumb, 90, 67), (full, 1280, 960))
        ]
        return self._push_from(user_id, chat_id, fields, caption=caption, photo=sizes)

    def push_media_group(
        self, user_id: int, chat_id: int, photos: list[bytes], caption: str | None = None
    ) -> list[dict[str, Any]]:
        """An album: one message per photo sharing a ``media_group_id``, the caption on the first (as clients do)."""
        group = str(10**17 + next(self._ids))
        return [
            self.push_photo(user_id, chat_id, jpeg, caption if i == 0 else None, media_group_id=group)
            for i, jpeg in enumerate(photos)
        ]

    def push_callback(self, user_id: int, chat_id: int, message_id: int, data: str) -> dict[str, Any]:
        """A tap on an inline button of the bot's message ``message_id``."""
        query_id = str(next(self._ids) + 10**12)
        self._callbacks[query_id] = False
        message = self._chats[chat_id].messages.get(message_id) or {
            "message_id": message_id,
            "date": 0,  # InaccessibleMessage: deleted or unknown
            "chat": self._chat_obj(chat_id),
        }
        query = {"id": query_id, "from": self._user(user_id), "message": message}
        query |= {"chat_instance": str(chat_id), "data": data}
        return self.push_update({"callback_query": query})

    def push_edited_message(self, user_id: int, chat_id: int, message_id: int, text: str) -> dict[str, Any]:
        message = {"message_id": message_id, "date": 1, "edit_date": 2, "chat": self._chat_obj(chat_id)}
        message |= {"from": self._user(user_id), "text": text}
        original = self._chats[chat_id].log.get(message_id, {})
        message |= {
            k: original[k] for k in ("message_thread_id", "is_topic_message", "reply_to_message") if k in original
        }
        return self.push_update({"edited_message": message})

    def push_forwarded(
        self, user_id: int, chat_id: int, text: str, *, origin_user_id: int = 999, **fields: Any
    ) -> dict[str, Any]:
        origin = {"type": "user", "date": 1, "sender_user": self._user(origin_user_id)}
        return self.push_message(user_id, chat_id, text, forward_origin=origin, **fields)

    def deliver_again(self, update_id: int) -> None:
        """Deliver an already pushed update once more, even if it was confirmed (a lost acknowledgement)."""
        if update_id not in self._updates:
            raise KeyError(update_id)
        self._again.append(update_id)
        self._wake()

    def deliver_each(self, times: int) -> None:
        """From now on every update goes out ``times`` times, confirmed or not: the same update id again, as
        when Telegram misses the acknowledgement (on top of the redelivery of whatever is unconfirmed)."""
        self._times = max(1, times)

    def deliveries(self, update_id: int) -> int:
        """How many times an update went out in a getUpdates answer."""
        return self._deliveries[update_id]

    @property
    def pending(self) -> list[int]:
        """Update ids not yet confirmed by the bot's offset."""
        return list(self._pending)

    def add_file(
        self,
        data: bytes,
        *,
        folder: str = "documents",
        ext: str = "bin",
        size: int | None = None,
        name: str = "",
        mime_type: str = "",
    ) -> StoredFile:
        n = next(self._ids)
        file_id = f"F{n:06d}"
        stored = StoredFile(
            file_id, data, len(data) if size is None else size, f"{folder}/file_{n}.{ext}", name, mime_type
        )
        self.files[file_id] = stored
        return stored

    # --- test API: limits and clock ---

    def set_flood(self, limit_per_s: int | None, *, retry_after: int = 1) -> None:
        """More than ``limit_per_s`` messages/edits in one chat within a second → 429 with retry_after."""
        self._flood = limit_per_s
        self._retry_after = retry_after

    def advance_clock(self, seconds: float) -> None:
        """Move the flood-control clock forward (lets a test pass a retry_after without sleeping)."""
        self._clock_offset += seconds

    # --- test API: what the bot did ---

    @property
    def sent(self) -> list[Call]:
        """The bot's successful actions (sends, edits, deletes, answers, commands) in order."""
        return [c for c in self.requests if c.ok and c.method not in _READ_METHODS]

    def calls(self, method: str) -> list[Call]:
        """Every request of one method, successful or not."""
        return [c for c in self.requests if c.method == method]

    def texts(self, chat_id: int | None = None) -> list[str]:
        """Texts of the messages the bot sent successfully (as sent, before any edit)."""
        return [
            str(c.params.get("text", ""))
            for c in self.sent
            if c.method == "sendMessage" and (chat_id is None or c.params.get("chat_id") == chat_id)
        ]

    def messages(self, chat_id: int) -> dict[int, dict[str, Any]]:
        """The bot's messages in a chat as they stand now (edits applied, deletions gone).

        In a forum these include the service messages of the bot's topic actions (``forum_topic_created`` …);
        ``messages_in`` and ``texts_in`` narrow to one topic."""
        return dict(self._chats[chat_id].messages)

    async def wait_for(self, predicate: Callable[[], T], timeout: float = 10.0) -> T:  # noqa: ASYNC109
        """Wait until ``predicate()`` is truthy (re-checked after every request and push); return its value."""
        try:
            return await asyncio.wait_for(self._until(predicate), timeout)
        except TimeoutError:
            tail = [f"{c.method} {c.status} {dict(c.params)}"[:200] for c in self.requests[-8:]]
            said = [t[:200] for t in self.texts()[-10:]]  # what the bot told the chats, which polling edits hide
            raise TimeoutError(f"condition not met in {timeout}s; last messages: {said}; requests: {tail}") from None

    async def _until(self, predicate: Callable[[], T]) -> T:
        while True:
            assert self._changed is not None, "start the double first"
            changed = self._changed
            value = predicate()
            if value:
                return value
            await changed.wait()

    # --- internals ---

    def _now(self) -> float:
        return asyncio.get_running_loop().time() + self._clock_offset

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    def _user(self, user_id: int) -> dict[str, Any]:
        return {"id": user_id, "is_bot": False, "first_name": f"user{user_id}", "username": f"user{user_id}"}

    def _chat_obj(self, chat_id: int) -> dict[str, Any]:
        forum = self._forum_chat(chat_id)
        if forum is not None:
            return forum
        if chat_id > 0:
            return {"id": chat_id, "type": "private", "first_name": f"user{chat_id}"}
        return {"id": chat_id, "type": "supergroup", "title": f"group{-chat_id}"}

    def _new_message(self, chat_id: int, sender: Mapping[str, Any], **content: Any) -> dict[str, Any]:
        chat = self._chats[chat_id]
        message_id = chat.next_message_id
        chat.next_message_id += 1
        message = {"message_id": message_id, "date": 1_700_000_000 + message_id, "chat": self._chat_obj(chat_id)}
        message |= {"from": dict(sender), **content}
        chat.log[message_id] = message
        return message

    def _user_message(self, user_id: int, chat_id: int, **content: Any) -> dict[str, Any]:
        return self._new_message(chat_id, self._user(user_id), **content)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        path = request.match_info["path"]
        for f in self.files.values():
            if f.path == path:
                return web.Response(body=f.data, content_type="application/octet-stream")
        return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params: dict[str, Any] = {}
        files: dict[str, StoredFile] = {}
        status, result, parameters = 200, None, None
        try:
            params, files = await self._params(request)
            if request.match_info["token"] != self.token:
                raise _ApiError(401, "Unauthorized")
            handler = getattr(self, f"_m_{method}", None)
            if handler is None:
                raise _ApiError(404, "Not Found")
            result = await handler(params, files)
        except _ApiError as err:
            status, result, parameters = err.status, err.description, err.parameters
        self.requests.append(Call(method, params, files, status, result))
        self._wake()
        if status == 200:
            return web.json_response({"ok": True, "result": result})
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": result}
        if parameters:
            body["parameters"] = dict(parameters)
        return web.json_response(body, status=status)

    async def _params(self, request: web.Request) -> tuple[dict[str, Any], dict[str, StoredFile]]:
        files: dict[str, StoredFile] = {}
        if request.content_type == "application/json":
            body = await request.json() if request.can_read_body else {}
            return dict(body), files
        raw: dict[str, str] = dict(request.query)
        form = await request.post()
        for key, value in form.items():
            if isinstance(value, web.FileField):
                data = value.file.read()
                ext = (value.filename or "bin").rsplit(".", 1)[-1]
                files[key] = self.add_file(data, ext=ext, name=value.filename or "", mime_type=value.content_type)
            else:
                raw[key] = str(value)
        params: dict[str, Any] = {}
        for key, value in raw.items():
            if value.startswith("attach://") and value[9:] in files:
                params[key] = files[value[9:]]
            elif key in _INT_FIELDS and re.fullmatch(r"-?\d+", value):
                params[key] = int(value)
            elif key in _BOOL_FIELDS:
                params[key] = value.lower() == "true"
            elif key in _JSON_FIELDS:
                try:
                    params[key] = json.loads(value)
                except json.JSONDecodeError:
                    raise _bad(f"can't parse {key} JSON object") from None
            else:
                params[key] = value
        return params, files

    def _flood_check(self, method: str, chat_id: int) -> None:
        if method not in _FLOOD_METHODS or self._flood is None:
            return
        chat = self._chats[chat_id]
        now = self._now()
        if now < chat.blocked_until:
            wait = max(1, math.ceil(chat.blocked_until - now))
            raise _ApiError(429, f"Too Many Requests: retry after {wait}", {"retry_after": wait})
        while chat.sends and chat.sends[0] <= now - 1.0:
            chat.sends.popleft()
        if len(chat.sends) >= self._flood:
            chat.blocked_until = now + self._retry_after
            wait = self._retry_after
            raise _ApiError(429, f"Too Many Requests: retry after {wait}", {"retry_after": wait})
        chat.sends.append(now)

    def _check_text(self, text: Any, parse_mode: Any, *, limit: int = MAX_TEXT, what: str = "message") -> None:
        if not isinstance(text, str) or not text.strip():
            raise _bad(f"{what} text is empty")
        visible = text
        if parse_mode and str(parse_mode).upper() == "HTML":
            try:
                visible = check_html(text)
            except HtmlError as err:
                raise _bad(f"can't parse entities: {err}") from None
            if not visible.strip():
                raise _bad(f"{what} text is empty")
        if len(visible) > limit:
            raise _bad(f"{what} is too long")

    def _chat_id(self, params: Mapping[str, Any]) -> int:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int):
            raise _bad("chat not found")
        return chat_id

    def _bot_message(self, params: Mapping[str, Any]) -> dict[str, Any]:
        chat = self._chats[self._chat_id(params)]
        message = chat.messages.get(int(params.get("message_id", 0)))
        if message is None:
            raise _bad("message to edit not found")
        return message

    # --- Bot API methods (``_m_<method>``) ---

    async def _m_getMe(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        return self.bot_user | {"can_join_groups": True, "can_read_all_group_messages": False}

    async def _m_deleteWebhook(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        if params.get("drop_pending_updates"):
            self._pending.clear()
        return True

    async def _m_setWebhook(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        self.webhook = dict(params)  # tests read the url and the secret_token the bot registered
        return True

    async def _m_getWebhookInfo(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        return {"url": "", "has_custom_certificate": False, "pending_update_count": len(self._pending)}

    async def _m_getUpdates(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        offset = int(params.get("offset") or 0)
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        timeout = max(float(params.get("timeout") or 0), 0.0)
        if "allowed_updates" in params:  # Telegram keeps the last list given
            self._allowed = frozenset(params["allowed_updates"] or ())
        if offset > 0:
            self._pending = [u for u in self._pending if u >= offset]
        elif offset < 0:  # the last -offset updates; older ones are forgotten
            self._pending = self._pending[offset:]

        def ready() -> list[int]:
            allowed = self._allowed
            if allowed:  # updates of other kinds are dropped, as Telegram never stores them
                self._pending = [u for u in self._pending if self._kind(u) in allowed]
            ids = sorted(set(self._again) | set(self._pending))
            return ids[:limit]

        if not ready() and timeout and not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._until(lambda: bool(ready()) or self._closing), timeout)
        ids = ready()
        for uid in ids:
            self._deliveries[uid] += 1
            if uid in self._again:
                self._again.remove(uid)
            if self._deliveries[uid] < self._times:
                self._again.append(uid)
        return [self._updates[u] for u in ids]

    def _kind(self, update_id: int) -> str:
        return next((k for k in self._updates[update_id] if k != "update_id"), "")

    async def _m_setMyCommands(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        commands = params.get("commands") or []
        for c in commands:
            if not _COMMAND.match(str(c.get("command", ""))):
                raise _bad("BOT_COMMAND_INVALID")
            if not 1 <= len(str(c.get("description", ""))) <= 256:
                raise _bad("BOT_COMMAND_DESCRIPTION_INVALID")
        key = (
            json.dumps(params.get("scope") or {"type": "default"}, sort_keys=True),
            str(params.get("language_code") or ""),
        )
        self.commands[key] = [dict(c) for c in commands]
        return True

    async def _m_getMyCommands(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        key = (
            json.dumps(params.get("scope") or {"type": "default"}, sort_keys=True),
            str(params.get("language_code") or ""),
        )
        return self.commands.get(key, [])

    async def _m_sendMessage(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        chat_id = self._chat_id(params)
        self._check_text(params.get("text"), params.get("parse_mode"))
        place = self._placement(chat_id, params)
        self._flood_check("sendMessage", chat_id)
        content: dict[str, Any] = place | {"text": params["text"]}
        if params.get("reply_markup"):
            content["reply_markup"] = params["reply_markup"]
        return self._post(chat_id, **content)

    def _post(self, chat_id: int, **content: Any) -> dict[str, Any]:
        """A message the bot sent: in the chat's log and, until deleted, among its messages."""
        message = self._new_message(chat_id, self.bot_user, **content)
        self._chats[chat_id].messages[message["message_id"]] = message
        return message

    async def _m_editMessageText(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        if "inline_message_id" in params:
            raise _bad("inline messages are not supported by this double")
        message = self._bot_message(params)
        self._check_text(params.get("text"), params.get("parse_mode"))
        markup = params.get("reply_markup")
        if message.get("text") == params["text"] and message.get("reply_markup") == markup:
            raise _bad(
                "message is not modified: specified new message content and reply markup are exactly the "
                "same as a current content and reply markup of the message"
            )
        self._flood_check("editMessageText", self._chat_id(params))
        message["text"] = params["text"]
        message.pop("reply_markup", None)
        if markup:
            message["reply_markup"] = markup
        message["edit_date"] = message["date"] + 1
        return message

    async def _m_editMessageReplyMarkup(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        message = self._bot_message(params)
        markup = params.get("reply_markup")
        if message.get("reply_markup") == markup or (not markup and "reply_markup" not in message):
            raise _bad("message is not modified: specified new message content and reply markup are exactly the same")
        self._flood_check("editMessageReplyMarkup", self._chat_id(params))
        message.pop("reply_markup", None)
        if markup:
            message["reply_markup"] = markup
        return message

    async def _m_deleteMessage(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        chat = self._chats[self._chat_id(params)]
        message_id = int(params.get("message_id", 0))
        message = chat.messages.get(message_id)
        if message is None:
            raise _bad("message to delete not found")
        if self._undeletable(message):
            raise _bad("message can't be deleted")
        del chat.messages[message_id]
        chat.log.pop(message_id, None)
        return True

    async def _m_sendChatAction(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        chat_id = self._chat_id(params)
        if params.get("action") not in _CHAT_ACTIONS:
            raise _bad("wrong parameter action in request")
        self._placement(chat_id, params)
        return True

    async def _m_getChat(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        """ChatFullInfo: the chat object (``is_forum`` for a forum) and the fields PTB requires."""
        info = self._chat_obj(self._chat_id(params)) | {"accent_color_id": 0, "max_reaction_count": 11}
        gifts = dict.fromkeys(
            ("unlimited_gifts", "limited_gifts", "unique_gifts", "premium_subscription", "gifts_from_channels"), False
        )
        return info | {"accepted_gift_types": gifts}

    async def _m_answerCallbackQuery(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        query_id = str(params.get("callback_query_id", ""))
        if self._callbacks.get(query_id, True):  # unknown or already answered
            raise _bad("query is too old and response timeout expired or query ID is invalid")
        self._callbacks[query_id] = True
        return True

    async def _m_getFile(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        f = self.files.get(str(params.get("file_id", "")))
        if f is None:
            raise _bad("invalid file_id")
        if f.size > MAX_DOWNLOAD:
            raise _bad("file is too big")
        return {"file_id": f.file_id, "file_unique_id": f"u{f.file_id}", "file_size": f.size, "file_path": f.path}

    def _upload(self, params: Mapping[str, Any], files: Mapping[str, StoredFile], key: str) -> StoredFile:
        if key in files:  # uploaded as a multipart part of that name
            return files[key]
        value = params.get(key)
        if isinstance(value, StoredFile):
            return value
        if isinstance(value, str) and value in self.files:
            return self.files[value]
        raise _bad("wrong file identifier/HTTP URL specified")

    def _caption(self, params: Mapping[str, Any]) -> dict[str, Any]:
        caption = params.get("caption")
        if caption is None:
            return {}
        self._check_text(caption, params.get("parse_mode"), limit=MAX_CAPTION, what="message caption")
        return {"caption": caption}

    def _file_send(
        self, method: str, params: Mapping[str, Any], files: Mapping[str, StoredFile], key: str
    ) -> tuple[int, StoredFile, dict[str, Any]]:
        """What every send of a file checks first, in Telegram's order: the chat, the file under ``key``, where
        it goes and its caption, then flood control. (chat id, the file, the message's placement and caption)."""
        chat_id = self._chat_id(params)
        f = self._upload(params, files, key)
        content = self._placement(chat_id, params) | self._caption(params)
        self._flood_check(method, chat_id)
        return chat_id, f, content

    async def _m_sendDocument(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        chat_id, f, content = self._file_send("sendDocument", params, files, "document")
        document: dict[str, Any] = {"file_id": f.file_id, "file_unique_id": f"u{f.file_id}", "file_name": f.file_name}
        document |= {"mime_type": f.mime_type or "application/octet-stream", "file_size": f.size}
        return self._post(chat_id, document=document, **content)

    async def _m_sendVoice(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        """OGG/Opus becomes a voice note; anything else Telegram delivers as a plain document."""
        chat_id, f, content = self._file_send("sendVoice", params, files, "voice")
        data = f.data
        ids = {"file_id": f.file_id, "file_unique_id": f"u{f.file_id}", "file_size": f.size}
        if data.startswith(b"OggS") and b"OpusHead" in data[:512]:
            voice = ids | {"duration": int(params.get("duration") or 0), "mime_type": "audio/ogg"}
            return self._post(chat_id, voice=voice, **content)
        document = ids | {"file_name": f.file_name, "mime_type": f.mime_type or "application/octet-stream"}
        return self._post(chat_id, document=document, **content)

    async def _m_sendPhoto(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        chat_id, f, content = self._file_send("sendPhoto", params, files, "photo")
        size = {
            "file_id": f.file_id,
            "file_unique_id": f"u{f.file_id}",
            "width": 100,
            "height": 100,
            "file_size": f.size,
        }
        return self._post(chat_id, photo=[size], **content)
