"""Forum supergroups and their topics for the Telegram Bot API double (mixed into ``TelegramDouble``).

Declare a forum with ``tg.make_forum(chat_id, title=...)`` (a negative, supergroup id); its chat objects then
read ``{"type": "supergroup", "is_forum": true, "title": ...}``. The bot manages topics with createForumTopic,
editForumTopic, closeForumTopic, reopenForumTopic and deleteForumTopic, and sends into one with
``message_thread_id`` (sendMessage, sendDocument, sendPhoto, sendVoice, sendChatAction).

What the real Bot API does, and the double mirrors (checked against tdlib/telegram-bot-api's Client.cpp and
TDLib's ForumTopicManager):

- A topic *is* the thread of its ``forum_topic_created`` service message: ``message_thread_id`` equals that
  message's id. Id 1 is the General topic, which is no topic for the Bot API: its messages carry no
  ``message_thread_id`` and sending with ``message_thread_id=1`` is "message thread not found".
- Every message in a topic carries ``message_thread_id`` and ``is_topic_message: true`` and, unless it replies
  to something else, a ``reply_to_message`` that is the topic's creation message (the server's "implicit
  reply", ``get_implicit_reply_to_message_id``). Bots that read ``reply_to_message`` as "the user replied"
  must look past it; see banteg/takopi#152 and aiogram/aiogram#1511 for bots that did not.
- Topic names are cleaned as TDLib does: trimmed, runs of spaces/newlines made one space, cut to 128
  characters (longer names are cut, not refused); empty → "title must be non-empty".
- The forum_topic_created message can't be deleted with deleteMessage; deleteForumTopic deletes the topic
  with all its messages. Closing a closed topic (or reopening an open one, or an edit that changes nothing)
  is "TOPIC_NOT_MODIFIED". The bot, an administrator with can_manage_topics, may still post in a closed topic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.doubles.telegram import Call, StoredFile, _ApiError, _Chat

__all__ = ["GENERAL_TOPIC", "MAX_TOPIC_NAME", "TOPIC_COLORS", "ForumMixin"]

GENERAL_TOPIC = 1
MAX_TOPIC_NAME = 128
# The only icon colours Telegram accepts (the Bot API docs for createForumTopic); the first is the default.
TOPIC_COLORS = (0x6FB9F0, 0xFFD67E, 0xCB86DB, 0x8EEE98, 0xFF93B2, 0xFB6F5F)
_SPACES = re.compile(r"[ \n\u00a0]+")


def _bad(description: str) -> _ApiError:
    from tests.doubles.telegram import _bad as bad  # telegram.py imports this module: resolve at call time

    return bad(description)


def clean_topic_name(name: object) -> str:
    """A topic name as Telegram stores it (TDLib's ``clean_name``): trimmed, cut to 128, spaces collapsed."""
    text = str(name or "").strip()[:MAX_TOPIC_NAME]
    return _SPACES.sub(" ", text).strip()


def _quoted(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as it appears in another's ``reply_to_message``: never with a reply of its own."""
    return {k: v for k, v in message.items() if k != "reply_to_message"}


@dataclass(slots=True)
class _Topic:
    name: str
    icon_color: int
    icon_custom_emoji_id: str = ""
    closed: bool = False

    def info(self, thread_id: int) -> dict[str, Any]:
        """The Bot API's ForumTopic object."""
        out: dict[str, Any] = {"message_thread_id": thread_id, "name": self.name, "icon_color": self.icon_color}
        if self.icon_custom_emoji_id:
            out["icon_custom_emoji_id"] = self.icon_custom_emoji_id
        return out


@dataclass(slots=True)
class _Forum:
    title: str
    topics: dict[int, _Topic] = field(default_factory=dict)


class ForumMixin:
    """Forum topics for ``TelegramDouble``; the attributes below are the double's."""

    _forums: dict[int, _Forum]

    if TYPE_CHECKING:
        _chats: dict[int, _Chat]
        bot_user: dict[str, Any]
        requests: list[Call]

        @property
        def sent(self) -> list[Call]: ...
        def push_update(self, update: Mapping[str, Any]) -> dict[str, Any]: ...
        def _chat_id(self, params: Mapping[str, Any]) -> int: ...
        def _user(self, user_id: int) -> dict[str, Any]: ...
        def _new_message(self, chat_id: int, sender: Mapping[str, Any], **content: Any) -> dict[str, Any]: ...

    # --- test API ---

    def make_forum(self, chat_id: int, *, title: str = "Macupos") -> dict[str, Any]:
        """Make ``chat_id`` (negative: a supergroup) a forum; returns its chat object.

        Message id 1 is taken, as in a real supergroup (its creation), so no topic gets the General topic's id.
        """
        if chat_id >= 0:
            raise ValueError("forums are supergroups: give a negative chat id such as -1001234567890")
        self._forums[chat_id] = _Forum(title)
        chat = self._chats[chat_id]
        chat.next_message_id = max(chat.next_message_id, GENERAL_TOPIC + 1)
        return self._forum_chat(chat_id) or {}

    def topics(self, chat_id: int) -> dict[int, dict[str, Any]]:
        """The forum's open and closed topics (deleted ones gone): ForumTopic objects plus ``is_closed``."""
        forum = self._forums.get(chat_id)
        if forum is None:
            return {}
        return {tid: t.info(tid) | {"is_closed": t.closed} for tid, t in forum.topics.items()}

    def texts_in(self, chat_id: int, thread_id: int | None) -> list[str]:
        """Texts the bot sent into one topic (``None``: outside any topic), as sent, before any edit."""
        return [
            str(c.params.get("text", ""))
            for c in self.sent
            if c.method == "sendMessage"
            and isinstance(c.result, Mapping)
            and c.result.get("chat", {}).get("id") == chat_id
            and c.result.get("message_thread_id") == thread_id
        ]

    def messages_in(self, chat_id: int, thread_id: int | None) -> dict[int, dict[str, Any]]:
        """The bot's messages in one topic as they stand now (service messages included)."""
        return {mid: m for mid, m in self._chats[chat_id].messages.items() if m.get("message_thread_id") == thread_id}

    def push_forum_topic(
        self, user_id: int, chat_id: int, name: str, *, icon_color: int = TOPIC_COLORS[0]
    ) -> dict[str, Any]:
        """A person creates a topic in a Telegram client: the bot gets its ``forum_topic_created`` message.

        The topic's ``message_thread_id`` is ``update["message"]["message_id"]``.
        """
        forum = self._forums.get(chat_id)
        if forum is None:
            raise ValueError(f"chat {chat_id} is not a forum: call make_forum first")
        topic = _Topic(clean_topic_name(name), icon_color)
        created = {"name": topic.name, "icon_color": icon_color}
        message = self._new_message(chat_id, self._user(user_id), forum_topic_created=created)
        tid = message["message_id"]
        message |= {"message_thread_id": tid, "is_topic_message": True}
        forum.topics[tid] = topic
        return self.push_update({"message": message})

    # --- hooks for the double ---

    def _forum_chat(self, chat_id: int) -> dict[str, Any] | None:
        forum = self._forums.get(chat_id)
        if forum is None:
            return None
        return {"id": chat_id, "type": "supergroup", "title": forum.title, "is_forum": True}

    def _placement(self, chat_id: int, params: Mapping[str, Any]) -> dict[str, Any]:
        """Where a message the bot sends lands: its topic fields and ``reply_to_message``.

        ``message_thread_id`` must name a live topic of a forum ("message thread not found" otherwise; in a
        private chat too, which has no topics here); in an ordinary group it names a reply thread and is
        ignored. A reply without ``message_thread_id`` lands in the replied message's topic. The reply is
        quoted when the double knows the message; in a topic, no reply means the implicit one to its root.
        """
        chat = self._chats[chat_id]
        forum = self._forums.get(chat_id)
        thread = params.get("message_thread_id") or 0
        if not isinstance(thread, int):
            raise _bad("message thread not found")
        reply = params.get("reply_parameters")
        reply_id = reply.get("message_id") if isinstance(reply, Mapping) else params.get("reply_to_message_id")
        replied = chat.log.get(reply_id) if isinstance(reply_id, int) else None
        if thread:
            if forum is None:
                if chat_id > 0:
                    raise _bad("message thread not found")
                thread = 0
            elif thread not in forum.topics:
                raise _bad("message thread not found")
        elif forum is not None and replied is not None and replied.get("is_topic_message"):
            thread = int(replied["message_thread_id"])
        out: dict[str, Any] = {"message_thread_id": thread, "is_topic_message": True} if thread else {}
        target = replied if replied is not None else chat.log.get(thread) if thread else None
        if target is not None:
            out["reply_to_message"] = _quoted(target)
        return out

    def _into_topic(self, message: dict[str, Any]) -> None:
        """A pushed user message with ``message_thread_id`` in a forum, completed as Telegram delivers it."""
        chat = message.get("chat")
        chat_id = chat.get("id") if isinstance(chat, Mapping) else None
        forum = self._forums.get(chat_id) if isinstance(chat_id, int) else None
        if chat_id is None or forum is None:
            return  # private chats and ordinary groups: the fields stay as the test gave them
        replied = message.get("reply_to_message")
        thread = message.get("message_thread_id")
        if not thread and isinstance(replied, Mapping) and replied.get("is_topic_message"):
            thread = message["message_thread_id"] = replied["message_thread_id"]
        if not thread:
            return
        if thread not in forum.topics:
            raise ValueError(f"forum {chat_id} has no topic {thread} (deleted, or never created)")
        message["is_topic_message"] = True
        if replied is None:  # the implicit reply to the topic's creation message
            message["reply_to_message"] = _quoted(self._chats[chat_id].log[thread])

    def _undeletable(self, message: Mapping[str, Any]) -> bool:
        return "forum_topic_created" in message

    # --- Bot API methods ---

    def _forum_of(self, params: Mapping[str, Any]) -> tuple[int, _Forum]:
        chat_id = self._chat_id(params)
        forum = self._forums.get(chat_id)
        if forum is None:
            raise _bad("the chat is not a forum")
        return chat_id, forum

    def _topic_of(self, params: Mapping[str, Any]) -> tuple[int, _Forum, int, _Topic]:
        chat_id, forum = self._forum_of(params)
        tid = params.get("message_thread_id")
        if not isinstance(tid, int) or tid <= 0:
            raise _bad("invalid message thread identifier specified")
        topic = forum.topics.get(tid)
        if topic is None:
            raise _bad("TOPIC_ID_INVALID")
        return chat_id, forum, tid, topic

    def _service(self, chat_id: int, tid: int, **content: Any) -> dict[str, Any]:
        """A service message the bot's action posts in the topic (kept among the bot's messages)."""
        chat = self._chats[chat_id]
        message = self._new_message(chat_id, self.bot_user, **content)
        message |= {"message_thread_id": tid, "is_topic_message": True, "reply_to_message": _quoted(chat.log[tid])}
        chat.messages[message["message_id"]] = message
        return message

    async def _m_createForumTopic(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        chat_id, forum = self._forum_of(params)
        name = clean_topic_name(params.get("name"))
        if not name:
            raise _bad("title must be non-empty")
        try:
            color = int(params.get("icon_color") or 0) or TOPIC_COLORS[0]
        except (TypeError, ValueError):
            raise _bad('field "icon_color" must be a valid Number') from None
        if color not in TOPIC_COLORS:  # Telegram allows only these six
            raise _bad("invalid icon color specified")
        topic = _Topic(name, color, str(params.get("icon_custom_emoji_id") or ""))
        created: dict[str, Any] = {"name": name, "icon_color": color}
        if topic.icon_custom_emoji_id:
            created["icon_custom_emoji_id"] = topic.icon_custom_emoji_id
        chat = self._chats[chat_id]
        root = self._new_message(chat_id, self.bot_user, forum_topic_created=created)
        tid = root["message_id"]
        root |= {"message_thread_id": tid, "is_topic_message": True}
        chat.messages[tid] = root
        forum.topics[tid] = topic
        return topic.info(tid)

    async def _m_editForumTopic(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        chat_id, _, tid, topic = self._topic_of(params)
        edited: dict[str, Any] = {}
        if params.get("name"):
            name = clean_topic_name(params["name"])
            if not name:
                raise _bad("title must be non-empty")
            edited["name"] = name
        if "icon_custom_emoji_id" in params:
            edited["icon_custom_emoji_id"] = str(params.get("icon_custom_emoji_id") or "")
        if not edited:
            return True  # nothing asked: TDLib answers at once
        name = edited.get("name", topic.name)
        icon = edited.get("icon_custom_emoji_id", topic.icon_custom_emoji_id)
        if (name, icon) == (topic.name, topic.icon_custom_emoji_id):
            raise _bad("TOPIC_NOT_MODIFIED")
        topic.name, topic.icon_custom_emoji_id = name, icon
        self._service(chat_id, tid, forum_topic_edited=edited)
        return True

    async def _m_closeForumTopic(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        return self._toggle(params, closed=True)

    async def _m_reopenForumTopic(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        return self._toggle(params, closed=False)

    def _toggle(self, params: Mapping[str, Any], *, closed: bool) -> bool:
        chat_id, _, tid, topic = self._topic_of(params)
        if topic.closed == closed:
            raise _bad("TOPIC_NOT_MODIFIED")
        topic.closed = closed
        self._service(chat_id, tid, **{"forum_topic_closed" if closed else "forum_topic_reopened": {}})
        return True

    async def _m_deleteForumTopic(self, params: Mapping[str, Any], files: Mapping[str, StoredFile]) -> Any:
        chat_id, forum, tid, _ = self._topic_of(params)
        del forum.topics[tid]
        chat = self._chats[chat_id]
        for store in (chat.messages, chat.log):
            for mid in [mid for mid, m in store.items() if m.get("message_thread_id") == tid]:
                del store[mid]
        return True
