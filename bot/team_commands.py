"""``/role`` (the owner's: give or take a role in the team room) and ``/roles`` (anyone's: who holds which)."""

from __future__ import annotations

from dataclasses import dataclass

from telegram import Message, MessageEntity

from bot.roles import RoleBook
from bot.services import Services
from bot.settings_team import ASSIGNABLE_ROLES

__all__ = ["ROLE_USAGE", "TeamCommands"]

ROLE_USAGE = (
    "Usage: /role @user approver | member | viewer | none (or reply to someone's message with /role ROLE).\n"
    "approver: instructs and decides (Allow/Deny, Keep/Forget, Merge, Discard); member: instructs; "
    "viewer: reads; none: no role."
)


@dataclass(eq=False)
class TeamCommands:
    services: Services
    roles: RoleBook

    async def command(self, name: str, args: str, message: Message) -> None:
        text = await self.role(args, message) if name == "role" else self.listing()
        await self.services.sender.send(message.chat_id, text, html_text=False, reply_to=message.message_id)

    async def role(self, args: str, message: Message) -> str:
        words = args.split()
        subject: str | None = None
        shown = ""
        # Who: a reply's author, a mention of someone without a username (it carries their id), or the first word.
        mention = next((e for e in message.entities if e.type == MessageEntity.TEXT_MENTION and e.user), None)
        replied = message.reply_to_message
        if mention is not None and mention.user is not None:
            subject, shown = str(mention.user.id), mention.user.first_name
            words = [w for w in words if w.lower() in (*ASSIGNABLE_ROLES, "none")][-1:]
        elif replied is not None and replied.from_user is not None and len(words) == 1:
            user = replied.from_user
            subject, shown = str(user.id), f"@{user.username}" if user.username else user.first_name
            self.roles.observe(user.id, user.username or "", user.first_name)
        elif len(words) == 2:
            subject = self.roles.parse_subject(words[0])
            shown = words[0]
            words = words[1:]
        if subject is None or len(words) != 1:
            return ROLE_USAGE
        role = words[0].lower()
        if role not in (*ASSIGNABLE_ROLES, "none"):
            return ROLE_USAGE
        if subject == str(self.roles.owner_id):
            return "The owner's role does not change (the owner is the first of MACUPOS_ALLOWED_USERS)."
        await self.roles.set(subject, role, message.from_user.id if message.from_user else 0)
        if role == "none":
            return f"✅ {shown} has no role now: the bot ignores them."
        return f"✅ {shown} is now {role}."

    def listing(self) -> str:
        r = self.roles
        lines = ["👥 Roles", f"• owner: {r.name(r.owner_id)} ({r.owner_id})"]
        lines += [f"• {role}: {who} ({where})" for who, role, where in r.listing()]
        if len(lines) == 2:
            lines.append("No one else yet: /role @user approver | member | viewer.")
        return "\n".join(lines)
