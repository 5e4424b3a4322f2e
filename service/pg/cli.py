"""`macupos serve migrate`: one tenant's memory into PostgreSQL from a memory.db, or out of it into one.

Registered on the `serve` group by service/cli.py; psycopg is imported only when the command runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import click

from memory import MemoryStoreError
from service.errors import ServiceError
from service.tenants import check_tenant_name

if TYPE_CHECKING:
    from service.pg.link import PgLink

__all__ = ["DATABASE_KEY", "check_database", "database_url", "migrate_cmd", "run_closing", "tenant_param", "with_link"]

DATABASE_KEY = "macupos.database_url"  # ctx.meta: the `serve` group's --database, for its subcommands
R = TypeVar("R")


def database_url(ctx: click.Context, given: str = "") -> str:
    """The database a subcommand works on: its own --database, else the `serve` group's (or the env's)."""
    return given or str(ctx.meta.get(DATABASE_KEY) or "")


class _Closing(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closing)


def run_closing(opened: Callable[[], Awaitable[C]], fn: Callable[[C], Awaitable[R]], *known: type[Exception]) -> R:
    """Run ``fn`` on what ``opened`` gives, closed after; the service's and memory's errors, and ``known``, as
    one-line click errors."""

    async def main() -> R:
        thing = await opened()
        try:
            return await fn(thing)
        finally:
            await thing.close()

    plain: tuple[type[Exception], ...] = (MemoryStoreError, *known)  # their str() is the message
    try:
        return asyncio.run(main())
    except ServiceError as exc:
        raise click.ClickException(exc.message) from exc
    except plain as exc:
        raise click.ClickException(str(exc)) from exc


def with_link(url: str, fn: Callable[[PgLink], Awaitable[R]]) -> R:
    """Run ``fn`` with a link to the database (migrated if new); its errors as one-line click errors."""
    from service.pg.link import PgLink, SchemaMismatch

    return run_closing(lambda: PgLink.open(url, max_size=2), fn, SchemaMismatch)


def check_database(url: str) -> None:
    """Reach the database (and migrate it) now: a server that cannot is one error line, before it listens."""

    async def reached(link: PgLink) -> None:
        return None

    with_link(url, reached)


def tenant_param(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """A --tenant option's check (here and in `serve keys create`): a bad name is a usage error."""
    try:
        return check_tenant_name(value)
    except ServiceError as exc:
        raise click.BadParameter(exc.message) from None


@click.command("migrate")
@click.option(
    "--from-sqlite",
    "source",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A memory.db to copy in (its facts/events/ beside it come along).",
)
@click.option(
    "--to-sqlite",
    "target",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A new memory.db to write the tenant's memory to (with facts/events/ and handoffs/ beside it).",
)
@click.option("--tenant", required=True, callback=tenant_param, help="The tenant whose memory moves.")
@click.option("--database", "database", default="", help="postgresql://… (default: serve's --database).")
@click.option("--keys/--no-keys", default=True, show_default=True, help="--from-sqlite: copy TENANT's keys too.")
@click.pass_context
def migrate_cmd(
    ctx: click.Context, source: Path | None, target: Path | None, tenant: str, database: str, keys: bool
) -> None:
    """Move TENANT's memory into PostgreSQL (--from-sqlite PATH) or out of it (--to-sqlite PATH).

    In: every row of the file and its facts events, in one transaction that commits only when every table's
    count in PostgreSQL equals the file's; the tenant must hold no memory in the database yet. Its keys in
    $MACUPOS_HOME/service.db come along (--no-keys: not). Out: a plain memory.db that `macupos memory` and
    the embedded `macupos serve` read as they are.
    """
    from service.pg.migrate import MigrationReport, from_sqlite, to_sqlite

    if (source is None) == (target is None):
        raise click.UsageError("give one of --from-sqlite PATH or --to-sqlite PATH")
    url = database_url(ctx, database)
    if not url:
        raise click.UsageError("no database: --database postgresql://… (or MACUPOS_DATABASE_URL)")
    keys_db: Path | None = None
    if source is not None and keys:
        from memory import MemorySettings

        memory = ctx.find_object(MemorySettings)
        keys_db = memory.home / "service.db" if memory is not None else None

    async def run(link: PgLink) -> MigrationReport:
        if source is not None:
            return await from_sqlite(link, source.expanduser(), tenant, keys_db=keys_db)
        assert target is not None
        return await to_sqlite(link, tenant, target.expanduser())

    report = with_link(url, run)
    click.echo(f"{'TABLE':18}{'SQLITE':>12}{'POSTGRESQL':>14}")
    for name, (a, b) in report.rows.items():
        click.echo(f"{name:18}{a:>12}{b:>14}{'' if a == b else '  differs'}")
    if not report.equal:
        raise click.ClickException("the counts differ: nothing was committed")
    moved = f"{source} into tenant {tenant}" if source is not None else f"tenant {tenant} into {target}"
    extra = f" and {report.keys} key(s)" if report.keys else ""
    click.echo(f"moved {moved}{extra}", err=True)
