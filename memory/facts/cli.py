"""`macupos memory script | rebuild | facts load/export/show`: the structured facts from the shell."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import click

from memory.cli.types import ISO_INSTANT, run_command, settings_of
from memory.factory import Facts, open_facts
from memory.facts.model import FactsError

__all__ = ["facts_group", "rebuild_cmd", "script_cmd"]

R = TypeVar("R")


def _with_api(fn: Callable[[Facts], Awaitable[R]]) -> R:
    """Open the facts (local, or the memory service's: memory.factory) for one command."""
    settings = settings_of(click.get_current_context())

    async def main() -> R:
        api = await open_facts(settings)
        try:
            return await fn(api)
        finally:
            await api.close()

    try:
        return run_command(main())
    except FactsError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("script")
@click.argument("text", required=False)
@click.option("--file", "file", type=click.Path(path_type=Path, dir_okay=False), help="Read the script from F.")
@click.option("--as-of", type=ISO_INSTANT, help="Run as if now were this ISO-8601 time (decay, lifecycle, timestamps).")
def script_cmd(text: str | None, file: Path | None, as_of: datetime | None) -> None:
    """Run a Tcl memory script (remember, recall, search, link, consolidate, sweep, respond, ...).

    Prints what `respond` set, else the script's result. On an error prints `error: ... (line N)`
    and exits 1; a failed script changes nothing.
    """
    if (text is None) == (file is None):
        raise click.UsageError("give the script as TEXT or with --file F (one of them)")
    if file is not None:
        text = _read_text(file)
    assert text is not None
    result = _with_api(lambda api: api.run_script(text, as_of=as_of, provenance="cli"))
    if not result.ok:
        click.echo(result.text, err=True)
        sys.exit(1)
    if result.text:
        click.echo(result.text)


@click.command("rebuild")
def rebuild_cmd() -> None:
    """Rebuild the facts tables from the event log (every origin file), then rewrite the snapshot."""

    async def run(api: Facts) -> tuple[int, int]:
        n = await api.rebuild()
        return n, (await api.world())["memories"]

    events, memories = _with_api(run)
    click.echo(f"replayed {events} event(s): {memories} memories")


@click.group("facts")
def facts_group() -> None:
    """Structured facts: the readable snapshot and the injected tier."""


@facts_group.command("load")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def load_cmd(file: Path) -> None:
    """Re-apply a (hand-edited) snapshot FILE: new lines added, changed ones replaced."""
    text = _read_text(file)
    report = _with_api(lambda api: api.load_snapshot(text, provenance=f"snapshot {file.name}"))
    click.echo(f"added {report.added}, replaced {report.replaced}, unchanged {report.unchanged}")
    for line, why in report.rejected:
        click.echo(f"  line {line}: {why}", err=True)
    if report.rejected:
        sys.exit(1)


@facts_group.command("export")
def export_cmd() -> None:
    """Print the snapshot (replayable remember/link lines)."""
    click.echo(_with_api(lambda api: api.export_snapshot()), nl=False)


@facts_group.command("show")
@click.option("--as-of", type=ISO_INSTANT, help="Rank as if now were this ISO-8601 time.")
def show_cmd(as_of: datetime | None) -> None:
    """Print the injection tier (at most 12 lines) a session would start with."""
    for line in _with_api(lambda api: api.tiered_injection(as_of)):
        click.echo(line)


def _read_text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError:
        raise click.ClickException(f"cannot read {file}: not UTF-8 text") from None
