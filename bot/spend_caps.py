"""Spending caps: a run's, a day's for all sessions, a day's per project; and what /cost says of them.

The caps are ``MACUPOS_RUN_BUDGET_USD`` (a run's; a queued instruction's own ``budget_usd``, e.g. a schedule's
``budget=USD``, wins over it), ``MACUPOS_DAILY_BUDGET_USD`` (all sessions, per day of ``MACUPOS_TIMEZONE``) and
``MACUPOS_PROJECT_BUDGETS`` (``billing=5,other=2.5``: per project and day); none is set by default.

A run's spend is what its turns reported (SessionResult: Claude Code's cost of a turn; StageEnd: a Codex turn,
priced by relay.codex_prices) plus, while a Claude turn runs, its model calls priced as they come (SpendTick,
relay.claude_prices), which the turn's reported cost replaces when it ends. The day's spend is bot.db's runs
started that day plus the runs in flight. The checks are plain arithmetic on what :class:`SpendBook` holds
(it reads bot.db before each run starts), so a relay event is judged before anything else is awaited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from bot.errors import BotError
from bot.progress import escape
from bot.settings import BotSettings
from bot.state import BotState
from memory import day_start
from relay.errors import RelayError
from relay.events import RelayEvent, SessionResult, SpendTick, StageEnd

__all__ = ["Breach", "RunMeter", "SpendBook", "SpendCapReached", "cost_lines", "refusal_text", "stop_text"]

Scope = Literal["day", "project", "run", "user"]
RUN_VAR, DAY_VAR, PROJECT_VAR = "MACUPOS_RUN_BUDGET_USD", "MACUPOS_DAILY_BUDGET_USD", "MACUPOS_PROJECT_BUDGETS"
USER_VAR = "MACUPOS_USER_DAILY_BUDGET_USD"  # each person's day (bot.roles), the owner's runs left out
_RESTART = "in the environment or .env and restart the bot"
# The caps of a day, by scope: which cap (its variable and value) and how to raise it ({cap}, {project}: the Breach's).
_DAY_CAPS: Mapping[str, tuple[str, str]] = {
    "day": (f"today's cap for all sessions ({DAY_VAR}={{cap:g}})", f"To spend more today, raise {DAY_VAR} {_RESTART}."),
    "project": (
        f"today's cap for project {{project}} ({PROJECT_VAR} {{project}}={{cap:g}})",
        f"To spend more on {{project}} today, raise {{project}}=… in {PROJECT_VAR} {_RESTART}.",
    ),
    "user": (
        f"today's cap for each person's instructions ({USER_VAR}={{cap:g}})",
        f"The owner can raise {USER_VAR} {_RESTART}; the owner's own instructions are not under it.",
    ),
}


class SpendCapReached(BotError, RelayError):  # a RelayError: the relay ends the stage on it
    """Raised from an RPA run's event sink once a cap is reached: the relay ends the stage as it ends a failed one
    (its Claude session interrupted and ingested) and the run stops with its report."""


@dataclass(frozen=True, slots=True)
class Breach:
    """A cap that was reached: its scope, its amount, and the spend that reached it."""

    scope: Scope
    cap: float
    spent: float  # the scope's spend: the run's, the day's, or the project's today
    project: str = ""  # scope "project": its lanes' runs stop too (bot.lane_events); "" for a person's cap
    origin: str = ""  # scope "run": the instruction's origin when its own budget was the cap ("" the default)
    own_budget: bool = False  # scope "run": the cap was the instruction's budget_usd, not MACUPOS_RUN_BUDGET_USD

    @property
    def what(self) -> str:
        """Which cap, with the variable (or the schedule) that sets it and its value."""
        if self.scope in _DAY_CAPS:
            return _DAY_CAPS[self.scope][0].format(cap=self.cap, project=self.project)
        if self.own_budget:
            kind, _, ref = self.origin.partition(":")
            by = f"schedule {ref}'s budget={self.cap:g}" if kind == "schedule" else f"its budget={self.cap:g}"
            return f"the run's cap ({by})"
        return f"the run's cap ({RUN_VAR}={self.cap:g})"

    @property
    def how_to_raise(self) -> str:
        if self.scope in _DAY_CAPS:
            return _DAY_CAPS[self.scope][1].format(cap=self.cap, project=self.project)
        if self.own_budget and self.origin.startswith("schedule:"):
            return "To let its runs spend more, make the schedule again with a higher budget=USD (/every, /at)."
        if self.own_budget:
            return "To let such a run spend more, give it a higher budget=USD."
        return f"To let runs spend more, raise {RUN_VAR} {_RESTART}; a schedule's runs take budget=USD (/every, /at)."


def stop_text(b: Breach, run_spent: float, label: str = "") -> str:
    """The one message of a run a cap stopped: what it spent, which cap, how to raise it."""
    scope = "" if b.scope == "run" else f" with ${b.spent:.4f} spent today"
    return (
        f"💸 {label}Stopped by a spending cap: this run spent ${run_spent:.4f}, and {b.what} is reached{scope}. "
        f"Nothing more is spent on it. {b.how_to_raise}"
    )


def refusal_text(b: Breach, instruction: str, label: str = "") -> str:
    """Why an instruction did not start (the day's or the project's cap is reached), quoting it."""
    quoted = " ".join(instruction.split())
    quoted = quoted if len(quoted) <= 300 else quoted[:299] + "…"
    return (
        f"⛔ {label}Not started: {b.what} is reached with ${b.spent:.4f} spent today. {b.how_to_raise} "
        f"Then send it again: «{quoted}»"
    )


@dataclass(slots=True)
class RunMeter:
    """One run in flight: what it spent (reported) and is spending (estimated), and the cap it runs under."""

    run_id: int
    project: str
    started_at: float
    cap: float | None
    own_budget: bool = False
    origin: str = ""
    settled: float = 0.0  # what its finished turns reported (Claude Code's cost, Codex's priced usage)
    unsettled: float = 0.0  # the running Claude turn's model calls, priced as they came
    user_id: int | None = None  # who sent the instruction (the per-person cap)
    breach: Breach | None = None  # the cap that stopped it
    raised: bool = False  # an RPA run: SpendCapReached is out

    @property
    def spent(self) -> float:
        return self.settled + self.unsettled

    def add(self, event: RelayEvent) -> bool:
        """Count a relay event's spend; True when the run's spend went up."""
        if isinstance(event, SpendTick) and event.cost_usd:
            self.unsettled += event.cost_usd
            return True
        if isinstance(event, SessionResult) and event.usage.cost_usd is not None:
            # A turn's reported cost replaces its estimate; an unpriced result leaves the estimate standing.
            before, self.settled, self.unsettled = self.spent, self.settled + event.usage.cost_usd, 0.0
            return self.spent > before
        if isinstance(event, StageEnd) and event.engine == "codex" and event.usage.cost_usd:
            self.settled += event.usage.cost_usd
            return True
        return False


class SpendBook:
    """Today's spend by project (bot.db's runs, read before each run starts) and the runs in flight."""

    def __init__(self, state: BotState, settings: BotSettings, *, clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.run_cap = settings.run_budget_usd
        self.day_cap = settings.daily_budget_usd
        self.project_caps: Mapping[str, float] = settings.project_budgets
        self.user_cap = settings.user_daily_budget_usd
        self.owner_id = settings.owner_id
        self.timezone = settings.memory.timezone
        self._clock = clock
        self._live: dict[int, RunMeter] = {}
        self._day = 0.0  # the day start (epoch seconds) ``_stored`` belongs to
        self._stored: dict[str, float] = {}  # per project: runs started that day, finished (not in flight)
        self._stored_users: dict[int | None, float] = {}  # the same per person who sent the instruction

    @property
    def capped(self) -> bool:
        return self.run_cap is not None or self.day_cap is not None or bool(self.project_caps)

    def day_start(self) -> float:
        return day_start(self.timezone, datetime.fromtimestamp(self._clock(), UTC)).timestamp()

    async def refresh(self) -> None:
        """Read today's finished runs from bot.db (the runs in flight are counted here, not there)."""
        day, flying = self.day_start(), dict(self._live)
        stored = await self.state.spent_since(day, leave_out=flying)
        users = await self.state.spent_by_user(day, leave_out=flying)
        for run_id, m in flying.items():  # closed while the query ran: left out there, no longer counted here
            if run_id not in self._live and m.started_at >= day:
                stored[m.project] = stored.get(m.project, 0.0) + m.spent
                users[m.user_id] = users.get(m.user_id, 0.0) + m.spent
        self._stored, self._stored_users, self._day = stored, users, day

    def today(self, project: str | None = None) -> float:
        """USD spent today: every project's, or ``project``'s (finished runs and the ones in flight)."""
        stored = self._stored if self._day == self.day_start() else {}
        done = sum(v for p, v in stored.items() if project is None or p == project)
        return done + sum(m.spent for m in self._live.values() if project is None or m.project == project)

    def by_user(self) -> dict[int | None, float]:
        """USD spent today per person who sent the instructions (None: runs from before this was recorded)."""
        out = dict(self._stored_users) if self._day == self.day_start() else {}
        for m in self._live.values():
            out[m.user_id] = out.get(m.user_id, 0.0) + m.spent
        return out

    def projects(self) -> list[str]:
        """The projects with a cap or with spend today, by name."""
        flying = (m.project for m in self._live.values())
        return sorted({*self.project_caps, *(p for p, v in self._stored.items() if p and v), *flying})

    def open(
        self, run_id: int, project: str, budget_usd: float | None = None, origin: str = "", user_id: int | None = None
    ) -> RunMeter:
        """A run starts: its meter (its cap: ``budget_usd`` when given, else MACUPOS_RUN_BUDGET_USD)."""
        cap = budget_usd if budget_usd is not None else self.run_cap
        m = RunMeter(run_id, project, self._clock(), cap, budget_usd is not None, origin, user_id=user_id)
        self._live[run_id] = m
        return m

    def close(self, meter: RunMeter, cost: float) -> None:
        """A run ended having spent ``cost`` (call after bot.db has it)."""
        meter.settled, meter.unsettled = cost, 0.0
        if self._live.pop(meter.run_id, None) is not None and meter.started_at >= self._day:
            self._stored[meter.project] = self._stored.get(meter.project, 0.0) + cost
            self._stored_users[meter.user_id] = self._stored_users.get(meter.user_id, 0.0) + cost

    def breach(self, meter: RunMeter) -> Breach | None:
        """The cap the run's spend has reached: the day's, its project's, its own; None while under them all."""
        return self._shared(meter.project, meter.user_id) or (
            Breach("run", meter.cap, meter.spent, meter.project, meter.origin, meter.own_budget)
            if meter.cap is not None and meter.spent >= meter.cap
            else None
        )

    async def refusal(self, project: str, user_id: int | None = None) -> Breach | None:
        """Before a run of ``project`` starts: the day's, the project's or the sender's cap, when already reached."""
        if self.day_cap is None and project not in self.project_caps and not self._user_capped(user_id):
            return None
        await self.refresh()
        return self._shared(project, user_id)

    def _user_capped(self, user_id: int | None) -> bool:
        return self.user_cap is not None and user_id is not None and user_id != self.owner_id

    def _shared(self, project: str, user_id: int | None = None) -> Breach | None:
        if self.day_cap is not None and (spent := self.today()) >= self.day_cap:
            return Breach("day", self.day_cap, spent)
        cap = self.project_caps.get(project)
        if cap is not None and (spent := self.today(project)) >= cap:
            return Breach("project", cap, spent, project)
        user_cap = self.user_cap
        if (
            user_cap is not None
            and self._user_capped(user_id)
            and (spent := self.by_user().get(user_id, 0.0)) >= user_cap
        ):
            return Breach("user", user_cap, spent)  # no project: it must not stop others' runs of the project
        return None


async def cost_lines(book: SpendBook, who_is: Callable[[int], str] | None = None) -> list[str]:
    """/cost's lines (HTML) of today's spend against each cap: all sessions, per project, per person (``who_is``
    says who a user id is), per schedule."""
    await book.refresh()
    total = book.today()
    day = f" of ${book.day_cap:.2f} ({DAY_VAR})" if book.day_cap is not None else " (no daily cap)"
    lines = [f"<b>Today</b> ({escape(book.timezone)})", f"• all sessions: ${total:.4f}{escape(day)}"]
    for p in book.projects():
        cap = book.project_caps.get(p)
        against = f" of ${cap:.2f} ({PROJECT_VAR})" if cap is not None else ""
        lines.append(f"• {escape(p)}: ${book.today(p):.4f}{escape(against)}")
    run = f"${book.run_cap:.2f} ({RUN_VAR})" if book.run_cap is not None else "none"
    lines.append(f"• a run's cap: {escape(run)}")
    people = sorted(((u, v) for u, v in book.by_user().items() if v or u is not None), key=lambda p: -p[1])
    if people and (len(people) > 1 or book.user_cap is not None or people[0][0] != book.owner_id):
        per = f" (each but the owner: ${book.user_cap:.2f}, {USER_VAR})" if book.user_cap is not None else ""
        lines.append(f"<b>By person today</b>{escape(per)}")
        for uid, usd in people:
            who = "earlier runs" if uid is None else (who_is(uid) if who_is is not None else str(uid))
            lines.append(escape(f"• {who}: ${usd:.4f}"))
    schedules = await book.state.spent_by_schedule(book.day_start())
    if schedules:
        lines.append("<b>Schedules today</b>")
    for origin, text, runs, usd, budget in schedules:
        name = f"schedule {origin.partition(':')[2]}"
        title = " ".join(text.split())
        title = f" «{title[:40]}{'…' if len(title) > 40 else ''}»" if title else ""
        cap = budget if budget is not None else book.run_cap
        each = f" · cap ${cap:.2f} a run" if cap is not None else ""
        lines.append(escape(f"• {name}{title}: {runs} run{'s' if runs != 1 else ''} · ${usd:.4f}{each}"))
    return lines
