"""The composition root: builds the python-telegram-bot Application and every part of the bot, runs, shuts down.

``BotApp.start`` opens the durable state, memory, facts and the (lazily started) Codex engine, registers
the commands with Telegram, reports what a previous process left unfinished (offering Resume, re-running
nothing), handles stored updates that were never started, then polls. ``BotApp.stop`` closes everything
in ``finally`` blocks; a run cut by the stop stays recorded as running so the next start offers to resume it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
from typing import Any

from telegram import Update
from telegram.error import TelegramError
from telegram.ext import Application, ApplicationBuilder, ApplicationHandlerStop, ContextTypes, TypeHandler
from telegram.request import HTTPXRequest

from bot.approvals import Approvals
from bot.attachments import Attachments
from bot.branch_desk import BranchDesk
from bot.chat_controls import ChatControls
from bot.commands import Commands, bot_commands
from bot.dispatch import Dispatch
from bot.intake import ALLOWED_UPDATES, Intake
from bot.keys_command import KeyDesk
from bot.progress import Sender
from bot.project_memory import ProjectMemory
from bot.restart import RESTART_ACTION, Restart
from bot.review import Reviews
from bot.roles import RoleBook
from bot.rpa_runner import RpaRunner
from bot.schedule_commands import ScheduleCommands
from bot.schedules import Scheduler
from bot.services import Services, Tuning
from bot.session_list import SessionList
from bot.sessions import SessionManager
from bot.settings import BotSettings
from bot.state import BotState
from bot.team_commands import TeamCommands
from bot.trigger_intake import TriggerIntake
from bot.trigger_server import TriggerServer
from bot.voice.answers import VoiceAnswers
from bot.voice.flow import VoiceFlow
from bot.voice.speak import Speaker, speech_available
from bot.voice.spoken_replies import SpokenReplies
from bot.voice.transcribe import Transcriber
from memory import Facts, MemoryStoreError, open_facts, open_memory
from memory.facts import FactsApi, GitSync
from memory.redact import Redactor
from relay.claude_options import cli_wrapper
from relay.codex import CodexEngine
from relay.ledger import Ledger
from relay.settings import RelaySettings

__all__ = ["RESTART_ACTION", "BotApp", "build_application", "run_bot"]

logger = logging.getLogger(__name__)


def build_application(settings: BotSettings, *, webhook: bool = False) -> Application[Any, Any, Any, Any, Any, Any]:
    """The PTB Application pointed at ``settings.api_url``. Polling is ours (see bot.intake): no Updater then."""
    builder = (
        ApplicationBuilder()
        .token(settings.token)
        .base_url(settings.bot_base_url)
        .base_file_url(settings.file_base_url)
        .request(
            HTTPXRequest(connection_pool_size=32, read_timeout=30.0, write_timeout=60.0, media_write_timeout=120.0)
        )
        .get_updates_request(HTTPXRequest(connection_pool_size=2, read_timeout=10.0))
        .concurrent_updates(True)
    )
    if not webhook:
        builder = builder.updater(None)
    return builder.build()


class BotApp:
    def __init__(
        self,
        settings: BotSettings,
        relay: RelaySettings,
        *,
        tuning: Tuning | None = None,
        transcriber: Transcriber | None = None,
        speaker: Speaker | None = None,
        webhook_listen: tuple[str, int] = ("127.0.0.1", 8080),
    ) -> None:
        self.settings = settings
        self.relay = relay
        self.tuning = tuning or Tuning()
        self.webhook_listen = webhook_listen
        self.application = build_application(settings, webhook=settings.webhook_url is not None)
        self._given_transcriber = transcriber
        self._given_speaker = speaker  # tests lend one loaded voice; otherwise made here (lazily loaded)
        self.spoken: SpokenReplies | None = None
        self.services: Services | None = None
        self.intake: Intake | None = None
        self.sessions: SessionManager | None = None
        self._poller: asyncio.Task[None] | None = None
        self._stopped = False
        self._sync_stop = asyncio.Event()
        self._sync_task: asyncio.Task[None] | None = None
        self._scheduler_task: asyncio.Task[None] | None = None
        self._keys_task: asyncio.Task[None] | None = None
        self._trigger_server: TriggerServer | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    async def post_init(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Open the state, memory, facts and Codex; wire the parts."""
        s = self.settings
        s.home.mkdir(parents=True, exist_ok=True)
        # Before any session: parallel sessions then only read it (see relay.claude_options.cli_wrapper).
        await asyncio.to_thread(cli_wrapper, self.relay.home, self.relay.env)
        state = await BotState.open(s.db_path, redactor=Redactor(s.memory.own_secrets))
        try:
            # The local database, or a memory service's client (which keeps the cost ledger locally).
            eywa = await open_memory(s.memory, local_db=True)
        except BaseException:
            await state.close()  # its worker thread would keep a failed start alive
            raise
        facts: Facts | None
        try:
            facts = await open_facts(s.memory)
        except MemoryStoreError as exc:
            logger.warning("facts store unavailable: %s", exc)
            facts = None
        ledger: Ledger | None = Ledger(eywa)
        if ledger is not None and not await ledger.available():
            ledger = None
        # The app-server starts on the first Codex call, so a bot whose sessions never use Codex never pays for it.
        codex = CodexEngine(self.relay.env, self.relay.codex_cli)
        services = Services(
            settings=s,
            relay=self.relay,
            state=state,
            eywa=eywa,
            facts=facts,
            ledger=ledger,
            codex=codex,
            sender=Sender(application.bot),
            tuning=self.tuning,
            transcriber=self._given_transcriber,
            owns_transcriber=self._given_transcriber is None,
        )
        self.services = services
        services.roles = RoleBook(s, state)  # before the intake: its gate admits a team room's people
        await services.roles.load()
        # Spoken answers when the speech extra is installed; the voice itself loads on the first note.
        speaker = self._given_speaker or (Speaker() if speech_available() else None)
        self.spoken = SpokenReplies(services, speaker, owns_speaker=self._given_speaker is None)
        self.approvals = Approvals(services)
        self.reviews = Reviews(services)
        self.sessions = SessionManager(services, self.approvals, self.reviews, RpaRunner(services), spoken=self.spoken)
        services.sender.recorder = state.remember_message  # a reply to a session's message continues its lane
        self.controls = ChatControls(services, self.sessions)
        self.branch_desk = BranchDesk(services, self.sessions)
        self.scheduler = Scheduler(services, self.sessions)
        self.schedule_commands = ScheduleCommands(services, self.sessions, self.scheduler)
        self.triggers = TriggerIntake(services, self.sessions)
        self.commands = Commands(
            services, self.sessions, self.controls, self.branch_desk, self.schedule_commands, self.spoken
        )
        self.voice = VoiceFlow(
            services,
            self.sessions,
            VoiceAnswers(services, self.approvals, self.press),
            schedules=self.schedule_commands,
        )
        self.dispatch = Dispatch(
            services,
            self.sessions,
            self.commands,
            self.voice,
            Attachments(services, self.sessions),
            self.reviews,
            self.approvals,
            SessionList(services, self.controls.continue_session),
            self.branch_desk,
            self.schedule_commands,
        )
        self.keys = self.dispatch.keys = KeyDesk(services)
        self.dispatch.team = TeamCommands(services, services.roles)
        self.intake = Intake(services, self.dispatch.route, route_album=self.dispatch.route_album)
        self.restart = self.dispatch.restart = Restart(services, self.intake, self.sessions)
        await ProjectMemory(services).sync()  # memory and the hooks learn which projects are private
        if isinstance(facts, FactsApi):  # a memory service keeps its facts itself
            await self._start_facts_sync(facts)

    async def _start_facts_sync(self, facts: FactsApi) -> None:
        """Git-sync the facts folder when it is a repository with a remote (see docs/facts-sync.md)."""
        m = self.settings.memory
        sync = GitSync(
            m.home / "facts",
            push_every_s=m.facts_push_every_s,
            pull_every_s=m.facts_pull_every_s,
            on_pulled=facts.replay_new,
        )
        try:
            status = await asyncio.to_thread(sync.check)
        except (MemoryStoreError, OSError) as exc:
            logger.warning("facts sync unavailable: %s", exc)
            return
        if status.eligible:
            self._sync_task = asyncio.create_task(sync.run(self._sync_stop), name="facts-sync")
        else:
            logger.info("facts sync off: %s", status.reason)

    async def _start_triggers(self) -> None:
        """The signed trigger endpoint, when MACUPOS_TRIGGER_PORT is set (off by default)."""
        s = self.settings
        if s.trigger_port is None:
            return
        server = TriggerServer(
            secret=s.trigger_secret,
            accept=self.triggers.accept,
            host=s.trigger_host,
            port=s.trigger_port,
            resolve_project=self.triggers.project_of,
        )
        await server.start()
        self._trigger_server = server
        logger.info("trigger endpoint listening on %s:%s", s.trigger_host, server.port)

    async def _stop_automation(self) -> None:
        """No new fire or trigger once stopping begins: what they queued runs at the next start."""
        self._sync_stop.set()
        server, self._trigger_server = self._trigger_server, None
        if server is not None:
            await server.stop()
        for task in (self._scheduler_task, self._keys_task):
            if task is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, timeout=10)
        self._scheduler_task = self._keys_task = None

    async def post_shutdown(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        s = self.services
        if s is None:
            return
        await self._stop_automation()
        if self._sync_task is not None:
            self._sync_stop.set()
            with contextlib.suppress(TimeoutError, MemoryStoreError):
                await asyncio.wait_for(self._sync_task, timeout=120)  # let a running push finish
        try:
            if self.spoken is not None:
                await self.spoken.aclose()
            if s.codex is not None:
                await s.codex.aclose()
        finally:
            try:
                if s.transcriber is not None and s.owns_transcriber:
                    await s.transcriber.aclose()
            finally:
                try:
                    if s.facts is not None:
                        await s.facts.close()
                finally:
                    try:
                        await s.eywa.close()
                    finally:
                        await s.state.close()

    async def start(self) -> None:
        app = self.application
        await app.initialize()  # getMe: a bad token fails here
        await self.post_init(app)
        assert self.intake is not None and self.services is not None
        bot = app.bot
        try:
            await bot.set_my_commands(bot_commands())
        except TelegramError as exc:
            logger.warning("setMyCommands failed: %s", exc)
        await self.restart.recover()
        # After recover: fires queued before a crash run there once; fires missed while down run here once.
        self._scheduler_task = asyncio.create_task(self.scheduler.run(self._sync_stop), name="scheduler")
        self._keys_task = asyncio.create_task(self.keys.run(self._sync_stop), name="timed-deletions")
        await self._start_triggers()
        if self.settings.webhook_url is not None:
            app.add_handler(TypeHandler(Update, self._on_webhook_update), group=-1)
            await app.start()
            assert app.updater is not None
            host, port = self.webhook_listen
            # Telegram echoes the secret in a header on every call; PTB refuses requests without it,
            # so nobody who merely knows the URL can post updates that claim to come from the owner.
            await app.updater.start_webhook(
                listen=host,
                port=port,
                url_path=self.settings.webhook_url.rstrip("/").rsplit("/", 1)[-1],
                webhook_url=self.settings.webhook_url,
                allowed_updates=list(ALLOWED_UPDATES),
                secret_token=secrets.token_urlsafe(32),
            )
            return
        with contextlib.suppress(TelegramError):
            await bot.delete_webhook()
        self._poller = asyncio.create_task(self.intake.poll(), name="telegram-poll")

    async def stop(self) -> None:
        """Graceful: stop polling, cancel handlers, end live sessions (handoffs ingested), close everything."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self._poller is not None:
                self._poller.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._poller
                self._poller = None
            await self._stop_automation()
            if self.intake is not None:
                await self.intake.cancel()
                await self.intake.close_poll()
            if self.sessions is not None:
                await self.sessions.shutdown()
            app = self.application
            if app.updater is not None and app.updater.running:
                await app.updater.stop()
            if app.running:
                await app.stop()
        finally:
            try:
                await self.post_shutdown(self.application)
            finally:
                await self.application.shutdown()

    async def _on_webhook_update(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        if isinstance(update, Update) and self.intake is not None:
            await self.intake.receive(update)
        raise ApplicationHandlerStop

    async def press(self, token: str, user_id: int, message_id: int | None) -> str | None:
        """A button, tapped or answered by voice (bot.voice.answers): bot.dispatch.Dispatch.press."""
        return await self.dispatch.press(token, user_id, message_id)


async def run_bot(settings: BotSettings, relay: RelaySettings, *, tuning: Tuning | None = None) -> None:
    """Run until SIGINT or SIGTERM (``macupos bot``)."""
    app = BotApp(settings, relay, tuning=tuning)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # not on every platform
            loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
    except BaseException:
        await app.stop()  # close what did open: a failed start must exit, not linger on a worker thread
        raise
    try:
        poller = app._poller
        waiter = asyncio.create_task(stop.wait())
        watched: set[asyncio.Task[Any]] = {waiter} | ({poller} if poller is not None else set())
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        for task in done:
            if task is not waiter and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        await app.stop()
