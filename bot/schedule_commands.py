"""``/at``, ``/every`` and ``/schedules`` in the chat, and a spoken schedule ("every weekday at nine run the
tests") echoed with what it was taken to mean and a confirm.

``/at WHEN [@BRANCH] [profile=P] [budget=USD] TEXT`` and ``/every SPEC …`` (bot.schedule_spec has the
forms). ``profile`` is what the unattended run may do (bot.profiles; default ``tests``), ``budget`` its
spending cap in dollars (default ``MACUPOS_RUN_BUDGET_USD``). ``/schedules`` lists each with its next run,
last result and cost, and Pause / Resume / Run now / Delete.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from bot.lanes import split_branch
from bot.profiles import DEFAULT_PROFILE, check_profile
from bot.records import Callback
from bot.schedule_spec import ScheduleSpecError, Spec, describe, parse_at, parse_every, parse_spoken
from bot.schedules import Scheduler, local_time
from bot.sender import Button, send_cards
from bot.services import Services
from bot.sessions import SessionManager
from bot.state_schedules import Schedule

__all__ = ["SCHEDULE_ACTION", "ScheduleCommands"]

SCHEDULE_ACTION = "schedule"
_TTL_S = 7 * 86400.0
_OPTION = re.compile(r"^(profile|budget)=(\S+)\s*", re.IGNORECASE)


class ScheduleCommands:
    def __init__(self, services: Services, sessions: SessionManager, scheduler: Scheduler) -> None:
        self.services = services
        self.sessions = sessions
        self.scheduler = scheduler

    @property
    def tz(self) -> Any:
        return self.scheduler.tz

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.scheduler.clock(), UTC)

    async def command(self, name: str, args: str, chat_id: int, user_id: int) -> None:
        s = self.services
        if name == "schedules":
            await self.show(chat_id, user_id)
            return
        try:
            spec, text = (parse_at if name == "at" else parse_every)(args, self._now(), self.tz)
            reply = await self._make(chat_id, user_id, spec, text)
        except (ScheduleSpecError, ValueError) as exc:
            reply = f"🗓 {exc}"
        await s.sender.send(chat_id, reply, html_text=False)

    async def _make(self, chat_id: int, user_id: int, spec: Spec, text: str) -> str:
        """Store a schedule; the line that says what was made (ValueError with a reason for the chat)."""
        s = self.services
        profile, budget = DEFAULT_PROFILE, None
        branch, text = self._branch(text)
        while (m := _OPTION.match(text)) is not None:
            key, value = m.group(1).lower(), m.group(2)
            if key == "profile":
                profile = check_profile(value)
            else:
                budget = _dollars(value)
            text = text[m.end() :]
        if branch is None:
            branch, text = self._branch(text)
        text = text.strip()
        if not text:
            raise ValueError("say what to run after the time, e.g. /every weekday 09:00 run the tests")
        lane = ""
        project = await s.project_of(chat_id)
        if branch is not None and branch.casefold() == (s.sender.bot.username or "").casefold():
            branch = None  # "@macupos_bot" in a group addresses the bot, not a branch
        if branch is not None:
            # Recorded, not routed: making a schedule does not move where the owner's next message goes.
            found = await self.sessions.router.ensure_branch(chat_id, branch, project)
            if isinstance(found, str):
                raise ValueError(found)
            lane = found[0]
        next_at = self.scheduler.next_after(spec, self.scheduler.clock())
        if next_at is None:
            raise ValueError("that time has passed")
        made = await s.state.add_schedule(
            chat_id, user_id, spec.text, text, project.name, lane, profile, budget, next_at
        )
        self.scheduler.wake()
        where = f" in @{lane}" if lane else ""
        cap = f", cap ${budget:.2f}" if budget is not None else ""
        return (
            f"🗓 Schedule #{made.id}: {describe(spec, self.tz, self._now())}{where} (profile {profile}{cap}). "
            f"Next run {local_time(next_at, self.tz)}: {text[:200]}\n/schedules to pause, run now or delete it."
        )

    @staticmethod
    def _branch(text: str) -> tuple[str | None, str]:
        name, rest = split_branch(text)
        return (name, rest) if name is not None else (None, text)

    # -- /schedules ------------------------------------------------------------------------------------

    async def show(self, chat_id: int, user_id: int) -> None:
        async def entry(sched: Schedule) -> tuple[str, list[list[Button]]]:
            ops = {"active": [("⏸ Pause", "pause")], "paused": [("▶️ Resume", "resume")]}.get(sched.state, [])
            ops += [("⚡ Run now", "run"), ("🗑 Delete", "delete")]
            row = [(label, await self._button(sched, user_id, op)) for label, op in ops]
            return self.card(sched), [row]

        s = self.services
        empty = "No schedules. Make one with /at 18:30 … or /every weekday 09:00 …"
        await send_cards(s.sender, chat_id, await s.state.schedules(chat_id), empty, entry)

    def card(self, sched: Schedule) -> str:
        try:
            when = describe(Spec.parse_canonical(sched.spec), self.tz, self._now())
        except (ScheduleSpecError, ValueError):
            when = sched.spec
        lines = [f"🗓 #{sched.id} {when}" + (f" · @{sched.branch}" if sched.branch else "")]
        lines.append(sched.text[:300])
        nxt = (
            local_time(sched.next_at, self.tz) if sched.next_at is not None and sched.state == "active" else sched.state
        )
        lines.append(
            f"next: {nxt} · profile {sched.profile}" + (f" · cap ${sched.budget_usd:.2f}" if sched.budget_usd else "")
        )
        if sched.last_at is not None:
            result = sched.last_result or "running"
            lines.append(f"last: {local_time(sched.last_at, self.tz)} · {result} · ${sched.last_cost:.2f}")
        return "\n".join(lines)

    async def _button(self, sched: Schedule, user_id: int, op: str) -> str:
        payload = {"op": op, "id": sched.id}
        return await self.services.state.new_callback(sched.chat_id, user_id, SCHEDULE_ACTION, payload, _TTL_S)

    async def on_callback(self, callback: Callback) -> str:
        s = self.services
        op = str(callback.payload.get("op", ""))
        if op in ("make", "cancel"):
            return await self._spoken_answer(callback, op)
        sched = await s.state.schedule(int(callback.payload.get("id", 0)))
        if sched is None or sched.chat_id != callback.chat_id or sched.state == "deleted":
            return "That schedule is gone."
        if op == "pause":
            await s.state.set_schedule_state(sched.id, "paused", sched.next_at)
            toast = f"Schedule #{sched.id} paused."
        elif op == "resume":
            spec = Spec.parse_canonical(sched.spec)
            next_at = self.scheduler.next_after(spec, self.scheduler.clock())  # no catching up on a pause
            await s.state.set_schedule_state(sched.id, "active" if next_at is not None else "done", next_at)
            toast = f"Schedule #{sched.id} " + ("resumed." if next_at is not None else "has no run left: done.")
        elif op == "run":
            await self.scheduler.run_now(sched)
            toast = "Running it now."
        elif op == "delete":
            await s.state.set_schedule_state(sched.id, "deleted", None)
            toast = f"Schedule #{sched.id} deleted."
        else:
            return "Unknown button."
        self.scheduler.wake()
        await s.sender.send(callback.chat_id, f"🗓 {toast}", html_text=False)
        return toast

    # -- spoken ------------------------------------------------------------------------------------------

    async def offer_spoken(self, chat_id: int, user_id: int, transcript: str) -> bool:
        """A transcript that starts with a schedule: echo what it was taken to mean and ask; True when asked."""
        found = parse_spoken(transcript, self._now(), self.tz)
        if found is None:
            return False
        spec, text = found
        s = self.services
        payload = {"spec": spec.text, "text": text}
        group = f"schedule-{chat_id}-{int(self.scheduler.clock() * 1000)}"
        make = await s.state.new_callback(
            chat_id, user_id, SCHEDULE_ACTION, {"op": "make", **payload}, _TTL_S, group=group
        )
        cancel = await s.state.new_callback(
            chat_id, user_id, SCHEDULE_ACTION, {"op": "cancel", **payload}, _TTL_S, group=group
        )
        await s.sender.send(
            chat_id,
            f"🗓 Heard a schedule: {describe(spec, self.tz, self._now())}: {text[:300]}\n"
            f"Make it (profile {DEFAULT_PROFILE})?",
            html_text=False,
            buttons=[[("🗓 Schedule it", make), ("✖️ Cancel", cancel)]],
        )
        return True

    async def _spoken_answer(self, callback: Callback, op: str) -> str:
        if op == "cancel":
            return "Not scheduled."
        try:
            spec = Spec.parse_canonical(str(callback.payload.get("spec", "")))
            reply = await self._make(callback.chat_id, callback.user_id, spec, str(callback.payload.get("text", "")))
        except (ScheduleSpecError, ValueError) as exc:
            reply = f"🗓 {exc}"
        await self.services.sender.send(callback.chat_id, reply, html_text=False)
        return "Scheduled." if reply.startswith("🗓 Schedule #") else "Not scheduled."


def _dollars(raw: str) -> float:
    try:
        value = float(raw.lstrip("$"))
    except ValueError:
        raise ValueError(f"budget={raw} is not an amount of dollars (e.g. budget=2.50)") from None
    if not 0 < value <= 10_000:
        raise ValueError(f"budget={raw}: say an amount above 0 and at most 10000")
    return value
