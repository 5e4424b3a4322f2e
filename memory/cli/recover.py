"""`macupos memory recover`: the way out of a damaged memory database."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from memory.cli.types import run_command, settings_of

__all__ = ["recover_cmd"]


@click.command("recover")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Rebuild even when the database passes SQLite's integrity check.")
@click.pass_context
def recover_cmd(ctx: click.Context, paths: tuple[Path, ...], force: bool) -> None:
    """Rebuild a damaged memory.db from the handoffs/ mirror, the transcripts and the facts log.

    Transcripts are read again from Claude Code's and Codex's folders, from those the damaged file still
    names, and from PATHS (files or folders you ingested from elsewhere). The damaged file is kept, renamed
    memory.db.damaged-<time>; the forgotten sessions, the cost ledger and the subagent links are copied
    from it where its pages still read. Stop the bot first. A healthy file is left alone (exit 1) unless
    --force.
    """
    from memory.storage.recover import recover

    settings = settings_of(ctx)
    if settings.remote:  # nothing local to rebuild: the service keeps its own files
        raise click.ClickException(
            "memory recover works on the local memory database, not on the memory service "
            f"({settings.memory_url}): recover on the server, or unset MACUPOS_MEMORY_URL"
        )
    report = run_command(recover(settings, list(paths), force=force))
    if report.moved_to is not None:
        why = report.problem or "rebuilt on request (--force)"
        click.echo(f"moved the old database aside: {report.moved_to} ({why})")
    for table in report.unreadable:
        click.echo(f"  could not salvage {table}", err=True)
    _if_lost(
        report.unreadable,
        "sources",
        "the list of ingested transcript files was lost: name folders you ingested from outside "
        "Claude Code's and Codex's own as PATHS",
    )
    for path in report.ingest.missing:
        click.echo(f"  missing: {path}", err=True)
    _if_lost(
        report.unreadable,
        "forgotten",
        "the list of forgotten sessions was lost: a session you forgot may be back; forget it again "
        "(macupos memory forget ID)",
    )
    click.echo(
        f"salvaged {report.forgotten} forgotten session(s), {report.ledger_rows} ledger row(s), "
        f"{report.links} subagent link(s)"
    )
    click.echo(
        f"read {report.ingest.files_seen} transcript file(s): {report.ingest.sessions_new} session(s); "
        f"imported {report.imported.imported} handoff(s) from {settings.handoffs_dir}"
    )
    for path, why in report.imported.rejected:
        click.echo(f"  rejected {path}: {why}", err=True)
    if report.facts_error:
        click.echo(f"  structured facts not replayed: {report.facts_error}", err=True)
    else:
        click.echo(f"replayed the structured facts: {report.facts} memories")
    if report.pending_extraction:
        click.echo(
            f"{report.pending_extraction} session(s) have no handoff in the mirror: `macupos memory ingest` "
            "extracts them"
        )


def _if_lost(unreadable: Sequence[str], table: str, what: str) -> None:
    """Say what losing ``table`` (alone, or with every table) means for the owner."""
    if any(u.startswith((table, "every table")) for u in unreadable):
        click.echo(f"  {what}", err=True)
