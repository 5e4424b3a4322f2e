"""`macupos relay …` (click): one grounded Claude Code turn from a terminal, the same runner the bot uses.

The settings are built at the root (macupos/cli.py) and handed down through ``ctx.meta[SETTINGS_KEY]``
(relay.settings) as a zero-argument factory, so a bad ``[relay]`` config only fails the relay commands. The
SDKs are imported inside the commands: `macupos --help` must not pay a second for them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.decorators import FC

from memory import MemoryStoreError, StorageError
from memory.cli import StorageFaultExit
from relay.errors import CodexError, RelayError
from relay.events import SessionResult
from relay.settings import SETTINGS_KEY, RelaySettings

if TYPE_CHECKING:
    from relay.session import ClaudeSession

__all__ = ["relay_group"]


logger = logging.getLogger(__name__)


def _settings(ctx: click.Context) -> RelaySettings:
    factory: Callable[[], RelaySettings] | None = ctx.meta.get(SETTINGS_KEY)
    if factory is None:
        raise click.ClickException("relay settings were not configured (run through the `macupos` command)")
    try:
        return factory()
    except ValueError as exc:
        raise click.ClickException(f"relay configuration: {exc}") from exc


@click.group("relay")
def relay_group() -> None:
    """Claude Code sessions grounded by memory, with Codex as a subagent."""


async def _wire_codex(session: ClaudeSession, settings: RelaySettings, project: Path) -> Any:
    """Start Codex and give the session the `relay` tools; None (and a warning) when Codex cannot start."""
    from relay.codex import CodexEngine
    from relay.relay_tools import build_relay_server
    from relay.stages import stage_configs

    stages = stage_configs(settings.codex_stages)
    try:
        engine = await CodexEngine.start(env=settings.env, codex_bin=settings.codex_cli)
    except CodexError as exc:
        logger.warning("continuing without Codex: %s", exc)
        return None
    session.add_mcp_server(
        "relay",
        build_relay_server(engine, cwd=project, stages=stages, on_event=session.emit, on_turn=session.on_codex_turn),
    )
    return engine


async def _facts_lines(settings: RelaySettings) -> list[str]:
    """The owner's facts tier (≤ 12 lines) for grounding; none, with a warning, when the store can't open."""
    from memory import open_facts

    try:
        facts = await open_facts(settings.memory)
        try:
            return await facts.tiered_injection()
        finally:
            await facts.close()
    except MemoryStoreError as exc:  # facts must never stop a run from starting (as in the bot)
        logger.warning("grounding without facts: %s", exc)
        return []


async def _ask(
    settings: RelaySettings, instruction: str, project: Path, resume: str | None, codex: bool, started: list[Any]
) -> SessionResult:
    from memory import open_memory
    from relay.ledger import Ledger
    from relay.session import ClaudeSession

    # With a memory service, the local database still keeps the cost ledger.
    async with await open_memory(settings.memory, local_db=True) as eywa:
        ledger: Ledger | None = Ledger(eywa)
        if ledger is not None and not await ledger.available():
            logger.info("the memory database has no ledger table yet: costs are not recorded")
            ledger = None
        session = await ClaudeSession.start(
            settings,
            project_dir=project,
            eywa=eywa,
            facts_lines=await _facts_lines(settings),
            resume=resume,
            ledger=ledger,
        )
        started.append(session)
        engine = await _wire_codex(session, settings, project) if codex else None
        try:
            return await session.send(instruction)
        finally:
            await session.aclose()
            if engine is not None:
                await engine.aclose()


def _project_option(help_text: str) -> Callable[[FC], FC]:
    """--project, the existing folder a command works in."""
    return click.option(
        "--project", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path), help=help_text
    )


@relay_group.command("ask")
@click.argument("instruction")
@_project_option("The project folder Claude Code works in.")
@click.option("--resume", metavar="SESSION", help="Continue this Claude Code session id.")
@click.option("--json", "as_json", is_flag=True, help="Print {answer, session_id, cost_usd, tokens, duration_s}.")
@click.option("--codex/--no-codex", default=True, show_default=True, help="Offer Claude the Codex relay tools.")
@click.pass_context
def ask_cmd(
    ctx: click.Context, instruction: str, project: Path, resume: str | None, as_json: bool, codex: bool
) -> None:
    """Run one grounded Claude Code turn on INSTRUCTION and print the answer and the session id."""
    if not instruction.strip():
        raise click.UsageError("INSTRUCTION is empty")
    settings = _settings(ctx)
    started: list[Any] = []  # the session, once started: an interrupt still names it
    try:
        result = asyncio.run(_ask(settings, instruction, project, resume, codex, started))
    except StorageError as exc:  # memory.db cannot be used as it is: exit 3, as every command
        raise StorageFaultExit(exc) from exc
    except (RelayError, MemoryStoreError) as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        sid = started[0].session_id if started and started[0].session_id else ""
        tail = f"; continue it with --resume {sid}" if sid else " before the session started"
        raise click.ClickException(f"interrupted{tail}") from None
    if as_json:
        payload = {
            "answer": result.answer,
            "session_id": result.session_id,
            "cost_usd": result.usage.cost_usd,
            "tokens": result.usage.tokens,
            "duration_s": result.duration_s,
        }
        click.echo(json.dumps(payload, ensure_ascii=False))
        return
    click.echo(result.answer)
    cost = "cost unknown" if result.usage.cost_usd is None else f"${result.usage.cost_usd:.4f}"
    click.echo(
        f"\nsession {result.session_id} · {result.usage.tokens} tokens · {result.duration_s:.1f} s · {cost}"
        + (f" · {result.subtype}" if result.subtype != "success" else "")
    )


def _stage_line(event: Any) -> str:
    cost = "cost unknown" if event.usage.cost_usd is None else f"${event.usage.cost_usd:.4f}"
    step = f" r{event.round}" if event.stage in ("audit", "revise") else ""
    mark = "" if event.ok else " · FAILED"
    return (
        f"{event.stage}{step} · {event.engine} · {event.model or 'default model'} · {event.duration_s:.1f} s · "
        f"{event.usage.tokens} tokens · {cost}{mark}"
    )


async def _run(
    settings: RelaySettings,
    task: str,
    project: Path,
    stages: tuple[str, ...],
    max_rounds: int,
    executor: str,
    progress: Callable[[str], None],
) -> Any:
    from memory import open_memory
    from relay.codex import CodexEngine
    from relay.events import RelayEvent, StageEnd
    from relay.ledger import Ledger
    from relay.rpa import run_rpa

    async def on_event(event: RelayEvent) -> None:
        if isinstance(event, StageEnd):
            progress(_stage_line(event))

    async with await open_memory(settings.memory, local_db=True) as eywa:
        ledger: Ledger | None = Ledger(eywa)
        if ledger is not None and not await ledger.available():
            ledger = None
        engine = await CodexEngine.start(env=settings.env, codex_bin=settings.codex_cli)
        try:
            return await run_rpa(
                task,
                settings=settings,
                project_dir=project,
                eywa=eywa,
                facts_lines=await _facts_lines(settings),
                codex=engine,
                stages=stages,
                max_rounds=max_rounds,
                on_event=on_event,
                ledger=ledger,
                executor="claude" if executor == "claude" else "codex",
            )
        finally:
            await engine.aclose()


@relay_group.command("run")
@click.argument("task")
@_project_option("The project folder the run works in.")
@click.option(
    "--stages",
    default="research,plan,audit,execute,review",
    show_default=True,
    help="Comma-separated stages to run, always in this order.",
)
@click.option("--max-rounds", type=click.IntRange(1, 10), default=3, show_default=True, help="Audit rounds at most.")
@click.option(
    "--executor", type=click.Choice(["codex", "claude"]), default="codex", show_default=True, help="Who executes."
)
@click.option("--json", "as_json", is_flag=True, help="Print the run report as one JSON object.")
@click.pass_context
def run_cmd(
    ctx: click.Context, task: str, project: Path, stages: str, max_rounds: int, executor: str, as_json: bool
) -> None:
    """Research → Plan → Audit → execute → review on TASK; a progress line per stage, then the report.

    Exits 1 when a stage failed; a plan that was not approved is a finished run (exit 0, approved false).
    """
    if not task.strip():
        raise click.UsageError("TASK is empty")
    settings = _settings(ctx)
    wanted = tuple(s.strip() for s in stages.split(",") if s.strip())

    def progress(line: str) -> None:
        click.echo(line, err=as_json)  # stdout stays one JSON object with --json

    try:
        report = asyncio.run(_run(settings, task, project, wanted, max_rounds, executor, progress))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    except StorageError as exc:
        raise StorageFaultExit(exc) from exc
    except (RelayError, MemoryStoreError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        click.echo("\n" + report.summary)
    if report.error:
        ctx.exit(1)
