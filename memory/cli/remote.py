"""`macupos memory sync`, and what a memory-service client's commands say about its outbox (memory.remote.outbox)."""

from __future__ import annotations

from typing import Any

import click

from memory.cli.types import run_command, settings_of

__all__ = ["say_outbox", "sync_cmd"]


def say_outbox(eywa: Any) -> None:
    """A service client's uploads that still wait (memory.remote.outbox), on stderr: they are safe, not lost."""
    from memory.remote.client import RemoteEywa

    flushed = eywa.last_flush if isinstance(eywa, RemoteEywa) else None
    if flushed is None or not flushed.waiting:
        return
    why = "another sync is sending them" if flushed.busy else str(flushed.error or "not sent yet")
    click.echo(
        f"  {flushed.waiting} upload(s) wait in {eywa.outbox.folder} ({why}); `macupos memory sync` sends them",
        err=True,
    )


@click.command("sync")
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(0, 3600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for a sync already running (a hook's) to finish.",
)
@click.pass_context
def sync_cmd(ctx: click.Context, wait_s: float) -> None:
    """Send the transcripts waiting in the outbox to the memory service (MACUPOS_MEMORY_URL).

    Exits 0 when the outbox is empty at the end; 1 when uploads still wait (the service unreachable,
    the key refused) or one was refused for its content (kept in outbox/rejected/).
    """
    from memory.remote.client import RemoteEywa

    settings = settings_of(ctx)
    if not settings.remote:
        raise click.ClickException("no memory service is set (MACUPOS_MEMORY_URL): memory is local, nothing to send")

    async def main() -> Any:
        eywa = await RemoteEywa.open(settings)
        try:
            return await eywa.sync(wait_s=wait_s)
        finally:
            await eywa.close()

    flushed = run_command(main())
    sessions = sum(len(answer.get("sessions", [])) for _, answer in flushed.sent)
    click.echo(f"sent {len(flushed.sent)} upload(s) ({sessions} session(s)); {flushed.waiting} waiting")
    for name, why in flushed.rejected:
        click.echo(f"  refused {name}: {why} (kept in {settings.outbox_dir / 'rejected'})", err=True)
    if flushed.busy:
        raise click.ClickException(f"another sync kept the outbox for {wait_s:g}s; {flushed.waiting} upload(s) wait")
    if flushed.waiting:
        raise click.ClickException(f"{flushed.waiting} upload(s) still wait in {settings.outbox_dir}: {flushed.error}")
    if flushed.rejected:
        raise click.ClickException(f"the service refused {len(flushed.rejected)} upload(s)")
