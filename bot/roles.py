"""Team rooms: who may do what in a group chat the bot shares with people.

Roles, from most to least: **owner** (the first of MACUPOS_ALLOWED_USERS; never changed here), **approver**
(instructs, and taps the deciding buttons: Allow/Deny, Keep/Forget, Merge/Discard, Resume), **member**
(instructs; a deciding tap is refused with a toast), **viewer** (reads: read-only commands; an instruction
is refused with a message). Anyone else is a stranger, handled by bot.auth as before.

Where a role comes from, first match wins: the owner; the owner's ``/role`` (bot.db, a ``none`` row takes a
configured role away); the configuration (``MACUPOS_ROLES`` / ``[roles]``); MACUPOS_ALLOWED_USERS, whose
other users are approvers (they could decide their own requests before roles existed). A subject is a user id
or an ``@username``; the book learns each sender's username from their updates, so ``@alice`` is Alice once
she has written or tapped anything since the bot started.

A role given only by ``/role`` or configuration admits its holder in group chats (the team room), not in a
private chat with the bot: there nobody could decide their requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Literal, cast

from bot.settings import BotSettings
from bot.settings_team import ASSIGNABLE_ROLES, subject_of
from bot.state_team import TeamState

__all__ = [
    "DECIDER",
    "ONLY_APPROVERS",
    "ONLY_OWNER",
    "VIEWER_COMMANDS",
    "VIEWER_REFUSAL",
    "Role",
    "RoleBook",
    "sender_of",
]

Role = Literal["owner", "approver", "member", "viewer"]
ONLY_APPROVERS = "Only approvers can decide."
ONLY_OWNER = "Only the owner can do that."
VIEWER_REFUSAL = "👁 Your role here is viewer: you can read, not instruct. The owner can change it with /role."
# What a viewer may still ask: commands that only read (no session, no button that acts).
VIEWER_COMMANDS = frozenset(
    {"start", "help", "status", "cost", "recall", "facts", "rules", "handoffs", "roles", "graph"}
)

# Who pressed the button being handled (set by bot.dispatch around the button's handler), so a card can say
# "✅ allowed by @alice" without every handler's signature carrying the presser.
DECIDER: ContextVar[str] = ContextVar("DECIDER", default="")


def sender_of(update: Mapping[str, Any]) -> tuple[int | None, str, str]:
    """(user id, username or "", first name or "") of an update's sender, from its wire dictionary."""
    kind = next((k for k in update if k != "update_id" and update[k] is not None), "")
    body = update.get(kind)
    user = body.get("from") if isinstance(body, Mapping) else None
    if not isinstance(user, Mapping):
        return None, "", ""
    uid = user.get("id")
    ok = isinstance(uid, int) and not isinstance(uid, bool)
    return (uid if ok else None), str(user.get("username") or ""), str(user.get("first_name") or "")


class RoleBook:
    """The roles in force, held in memory (read before each update, so never a database read on the hot path)
    and written through to bot.db by :meth:`set`."""

    def __init__(self, settings: BotSettings, state: TeamState) -> None:
        self.owner_id = settings.owner_id
        self.allowed = settings.allowed_users
        self.configured: dict[str, str] = dict(settings.roles)
        self.state = state
        self.stored: dict[str, str] = {}
        self._usernames: dict[int, str] = {}  # user id → "@name" (lower case), as last seen
        self._names: dict[int, str] = {}  # user id → how a card names them

    async def load(self) -> None:
        self.stored = await self.state.roles()

    def observe(self, user_id: int | None, username: str, first_name: str = "") -> None:
        """A sender seen in an update: their @username binds configured and /role subjects to their id."""
        if user_id is None:
            return
        handle = f"@{username.lower()}" if username else ""
        known = user_id == self.owner_id or user_id in self.allowed
        tables = (self.stored, self.configured)
        if not known and not any(str(user_id) in t or (handle and handle in t) for t in tables):
            return  # a stranger: nothing to learn, and a flood of them must not grow these maps
        if username:
            self._usernames[user_id] = f"@{username.lower()}"
            self._names[user_id] = f"@{username}"
        elif first_name:
            self._names[user_id] = " ".join(first_name.split())[:40]

    def name(self, user_id: int) -> str:
        """How a card names the user: @username, else the first name, else the id."""
        return self._names.get(user_id) or f"user {user_id}"

    def _explicit(self, user_id: int) -> str | None:
        subjects = [str(user_id)]
        if user_id in self._usernames:
            subjects.append(self._usernames[user_id])
        for table in (self.stored, self.configured):
            for subject in subjects:
                if subject in table:
                    return table[subject]
        return None

    def role_of(self, user_id: int | None) -> Role | None:
        """The user's role; None for a stranger (or a role taken away with ``/role … none``)."""
        if user_id is None:
            return None
        if user_id == self.owner_id:
            return "owner"
        explicit = self._explicit(user_id)
        if explicit is not None:
            return None if explicit == "none" else cast(Role, explicit)
        return "approver" if user_id in self.allowed else None

    def admits(self, user_id: int | None, chat_id: int | None) -> bool:
        """Whether a role given only by /role or configuration lets this update in: in a group chat only."""
        return chat_id is not None and chat_id < 0 and self.role_of(user_id) is not None

    def may_decide(self, user_id: int | None) -> bool:
        return self.role_of(user_id) in ("owner", "approver")

    async def set(self, subject: str, role: str, set_by: int) -> None:
        """The owner's ``/role SUBJECT ROLE`` (``none`` takes it away)."""
        await self.state.set_role(subject, role, set_by)
        self.stored[subject] = role

    def listing(self) -> list[tuple[str, str, str]]:
        """(subject as shown, role, where it comes from) of every role but the owner's, sorted by role."""
        order = {r: i for i, r in enumerate(ASSIGNABLE_ROLES)}
        shown: dict[str, tuple[str, str]] = {}
        for uid in sorted(self.allowed - {self.owner_id}):
            shown[str(uid)] = ("approver", "MACUPOS_ALLOWED_USERS")
        for subject, role in self.configured.items():
            shown[subject] = (role, "configuration")
        for subject, role in self.stored.items():
            shown[subject] = (role, "/role")
        rows = [(self._shown(s), r, w) for s, (r, w) in shown.items() if r != "none"]
        return sorted(rows, key=lambda row: (order.get(row[1], 9), row[0]))

    def _shown(self, subject: str) -> str:
        if subject.isdigit():
            uid = int(subject)
            return f"{self._names[uid]} ({uid})" if uid in self._names else subject
        return subject

    @staticmethod
    def parse_subject(raw: str) -> str | None:
        return subject_of(raw)
