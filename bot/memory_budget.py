"""Telling a chat, once a day, that memory's daily budget for the extraction model is spent
(``MACUPOS_MEMORY_DAILY_BUDGET_USD``): its handoffs are the deterministic ones until the owner's next day."""

from __future__ import annotations

from bot.services import Services
from memory import day_start

__all__ = ["BudgetNotice"]


class BudgetNotice:
    """Once per chat and owner's day (``MACUPOS_TIMEZONE``); a restart may tell it once more."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._told: set[tuple[int, str]] = set()

    async def tell(self, chat_id: int) -> None:
        s = self.services
        m = s.settings.memory
        key = (chat_id, day_start(m.timezone).isoformat())
        if key in self._told:
            return
        self._told.add(key)
        budget = f"${m.memory_daily_budget_usd:.2f}" if m.memory_daily_budget_usd is not None else "its budget"
        text = (
            f"💸 Memory's daily budget ({budget}) for writing handoffs with the model is spent: until tomorrow "
            "handoffs are written without it (the deterministic summary). /cost shows the spend."
        )
        await s.sender.notice(chat_id, text, "that memory's budget is spent")
