"""The relay events of a lane's runs, normal and RPA: their spend against the caps first (bot.spend_caps), before
anything is awaited; handoffs to review, login refusals to the owner, the rest to the run's progress card.

A run that reaches a cap is stopped here: its Claude turn interrupted (a day's cap stops every lane's run, a
project's those of the project), an RPA run ended by raising SpendCapReached from its event sink, inside the
relay's run, which ends the stage as it ends a failed one. bot.lane_runner tells the owner when the run ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from bot.chat_lane import ChatSession
from bot.lanes import in_lane
from bot.login_notice import LoginNotices
from bot.memory_budget import BudgetNotice
from bot.review import Reviews
from bot.rpa_runner import stage_line
from bot.services import Services
from bot.spend_caps import Breach, SpendBook, SpendCapReached
from relay.events import (
    HandoffReady,
    LoginRefused,
    PermissionRequest,
    RelayEvent,
    SessionResult,
    SpendTick,
    StageEnd,
    StageStart,
    ToolStart,
)

__all__ = ["LaneEvents"]

logger = logging.getLogger(__name__)

# Where an RPA run's event sink may raise SpendCapReached: inside the relay's run, which ends the stage.
_RPA_STOPS = (SpendTick, StageStart, StageEnd)


class LaneEvents:
    def __init__(
        self,
        services: Services,
        reviews: Reviews,
        logins: LoginNotices,
        spend: SpendBook,
        lanes: Callable[[], Iterable[ChatSession]],
    ) -> None:
        self.services = services
        self.reviews = reviews
        self.logins = logins
        self.budget = BudgetNotice(services)
        self.spend = spend
        self.lanes = lanes  # every lane of every chat: a day's cap stops them all

    async def on_event(self, c: ChatSession, event: RelayEvent) -> None:
        """Relay events of the lane's runs, normal and RPA: spend against the caps first (before anything is
        awaited), handoffs go to review, the rest to the progress."""
        meter = c.meter
        if meter is not None and meter.add(event) and meter.breach is None:
            self._check_caps(c, mid_turn=not isinstance(event, SessionResult))
        breach = meter.breach if meter is not None else None
        if breach is not None and c.source != "rpa" and isinstance(event, SpendTick):
            self._halt(c)  # again if its turn started after the cap was reached (a day's cap stops every lane)
        with in_lane(c.tag):
            await self._on_lane_event(c, event)
        rpa_stop = c.source == "rpa" and isinstance(event, _RPA_STOPS)
        if meter is not None and breach is not None and rpa_stop and not meter.raised:
            meter.raised = True
            raise SpendCapReached(f"stopped by a spending cap: {breach.what}")

    def _check_caps(self, c: ChatSession, *, mid_turn: bool) -> None:
        """The lane's run reached a cap: stop it (its turn, when the spend came ``mid_turn``, not with its result);
        a day's cap stops every run, a project's those of the project."""
        assert c.meter is not None
        breach = self.spend.breach(c.meter)
        if breach is None:
            return
        self._stop(c, breach, halt=mid_turn)
        if breach.scope == "run":
            return
        for other in self.lanes():
            m = other.meter
            reached = breach.scope == "day" or (m is not None and m.project == breach.project)
            if other is not c and m is not None and m.breach is None and reached:
                self._stop(other, breach)

    def _stop(self, c: ChatSession, breach: Breach, *, halt: bool = True) -> None:
        assert c.meter is not None
        c.meter.breach = breach
        logger.info("run %s of chat %s reached a spending cap: %s", c.meter.run_id, c.chat_id, breach.what)
        if halt and c.source != "rpa":  # an RPA run ends at its next relay event (SpendCapReached)
            self._halt(c)

    def _halt(self, c: ChatSession) -> None:
        """Interrupt the lane's running turn (once at a time): the turn ends "interrupted", nothing more spent."""
        if c.live is None or (c.halting is not None and not c.halting.done()):
            return
        live = c.live

        async def interrupt() -> None:
            if not await live.interrupt():
                logger.info("nothing to interrupt in chat %s: the turn had ended", c.chat_id)

        c.halting = asyncio.create_task(interrupt(), name=f"halt-{c.chat_id}-{c.branch}")

    async def _on_lane_event(self, c: ChatSession, event: RelayEvent) -> None:
        progress = c.progress
        if isinstance(event, PermissionRequest):
            c.asking = True
        elif isinstance(event, ToolStart | StageEnd):
            c.asking = False
        if isinstance(event, HandoffReady):
            await self.reviews.post(c.chat_id, c.user_id, event.session_id, event.markdown)
            if event.budget_capped:
                await self.budget.tell(c.chat_id)
            return
        if isinstance(event, LoginRefused):  # a Codex call of the session: the model carries on without it
            await self.logins.tell(c.chat_id, event.engine, event.message)
            return
        if isinstance(event, StageEnd) and event.ok:
            self.logins.clear(c.chat_id, event.engine)
        if isinstance(event, StageEnd) and c.source == "rpa" and event.stage == "research" and event.thread_id:
            # The run's main Claude session: /sessions lists the run by it, even while memory is unavailable.
            await self.services.state.set_run_session(c.run_id, event.thread_id)
        if progress is None:
            return
        if isinstance(event, ToolStart):
            progress.update(tool=event.name)
        elif isinstance(event, PermissionRequest):
            progress.update(stage="waiting for your approval", tool=event.tool_name)
        elif isinstance(event, StageStart):
            progress.update(stage=f"{event.stage} ({event.engine})")
        elif isinstance(event, StageEnd):
            if c.source == "rpa":  # an RPA run shows a line per stage; a session's Codex turns only add usage
                progress.update(line=stage_line(event))
            progress.add_usage(event.usage.tokens, event.usage.cost_usd)
