"""`macupos serve`: the memory service; `macupos serve keys create|list|revoke`: its API keys.

The group stands on its own click context: it takes the memory settings as the context object and its
configuration-backed defaults (``serve_defaults``: MACUPOS_PUBLIC_URL and the rest) as the context's
default map, both from whoever mounts it (macupos/cli.py, which loads the environment, `.env` and
config.toml once). It reads no environment itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click
from click.decorators import FC

from memory import MemorySettings, MemoryStoreError, SettingsError
from memory.config import public_url as _public_url
from memory.config import telegram_user_ids
from service.keys import SqliteKeyStore
from service.pg.cli import DATABASE_KEY, check_database, database_url, migrate_cmd, run_closing, tenant_param, with_link
from service.settings import MB, OWNER_ONLY_UMASK, Limits, ServiceSettings
from service.tenants import SCOPES, KeyStore, Scope
from service.web.settings import WebSettings

__all__ = ["serve_defaults", "serve_group"]

R = TypeVar("R")
_DEFAULTS = Limits()

# The options whose default comes from the configuration: option name → variable. Their help names the variable.
_FROM_CONFIG = {
    "ingest_budget_mb": "MACUPOS_SERVICE_INGEST_BUDGET_MB",
    "public_url": "MACUPOS_PUBLIC_URL",
    "telegram_token": "TELEGRAM_BOT_TOKEN",
    "telegram_users": "MACUPOS_ALLOWED_USERS",
    "database": "MACUPOS_DATABASE_URL",
}


def serve_defaults(env: Mapping[str, str]) -> dict[str, Any]:
    """The group's default map from the loaded configuration's variables (memory.Config.env): a variable that
    is set (not empty) is its option's default, so a command-line option still wins."""
    return {option: env[name] for option, name in _FROM_CONFIG.items() if env.get(name)}


def _floor_option(flag: str, floor: float, default: float, help_text: str) -> Callable[[FC], FC]:
    """A float option of at least ``floor``, its default shown: the service's limits."""
    return click.option(flag, type=click.FloatRange(min=floor), default=default, show_default=True, help=help_text)


def _memory_settings(ctx: click.Context) -> MemorySettings:
    settings = ctx.find_object(MemorySettings)
    if settings is None:  # the composition root (macupos/cli.py) always sets it
        raise click.UsageError("memory settings were not provided (run it as `macupos serve`)")
    return settings


def _with_keys(ctx: click.Context, fn: Callable[[KeyStore], Awaitable[R]]) -> R:
    path = _memory_settings(ctx).home / "service.db"
    url = database_url(ctx)
    if url:  # the keys of a server on PostgreSQL live there
        from service.pg.keys import PgKeyStore

        return with_link(url, lambda link: fn(PgKeyStore(link)))
    return run_closing(lambda: SqliteKeyStore.open(path), fn)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8750, show_default=True, help="0: any free port.")
@click.option("--certfile", type=click.Path(path_type=Path, dir_okay=False), help="TLS certificate (PEM).")
@click.option("--keyfile", type=click.Path(path_type=Path, dir_okay=False), help="TLS private key (PEM).")
@click.option("--allow-register", is_flag=True, help="Open POST /v1/register (self-service tenants, rate limited).")
@click.option("--llm/--no-llm", "use_llm", default=False, show_default=True, help="Handoffs by the LLM extractor.")
@click.option("--cors-origin", "cors", multiple=True, help="An origin browsers may call from (CORS is off without).")
@click.option(
    "--forwarded-allow-ips",
    default="127.0.0.1",
    show_default=True,
    help="Proxies whose X-Forwarded-For/-Proto are believed (comma-separated, or *).",
)
@_floor_option("--rate", 0, _DEFAULTS.rate_per_s, "Requests a second per key, sustained (0: no limit).")
@click.option("--burst", type=click.IntRange(min=1), default=_DEFAULTS.rate_burst, show_default=True)
@_floor_option(
    "--max-transcript-mb", 0.001, _DEFAULTS.transcript_bytes / MB, "Largest transcript upload, after gunzip."
)
@_floor_option("--request-timeout", 0.1, _DEFAULTS.request_timeout_s, "Seconds a request may take (504 after).")
@_floor_option(
    "--upload-timeout", 0.1, _DEFAULTS.upload_timeout_s, "Seconds an upload (and its ingest) or an MCP call may take."
)
@_floor_option(
    "--head-timeout",
    0.1,
    _DEFAULTS.head_timeout_s,
    "Seconds a client may take to send a request's headers (the connection is closed after).",
)
@_floor_option(
    "--ingest-budget-mb",
    0,
    _DEFAULTS.ingest_budget_bytes / MB,
    "Transcript MB ingested at once, all tenants together; uploads past it get 503 (0: no limit)."
    " [MACUPOS_SERVICE_INGEST_BUDGET_MB]",
)
@click.option(
    "--max-open-tenants",
    type=click.IntRange(min=1),
    default=_DEFAULTS.max_open_tenants,
    show_default=True,
    help="Tenants kept open; the least recently used is closed past this.",
)
@click.option(
    "--local",
    is_flag=True,
    help="This machine's own memory ($MACUPOS_HOME) as web pages on 127.0.0.1, no API; prints a one-time login link.",
)
@click.option(
    "--public-url",
    default="",
    help="The HTTPS address the pages are reached at from outside: the Telegram Mini App's. [MACUPOS_PUBLIC_URL]",
)
@click.option("--no-web", "no_web", is_flag=True, help="No web pages: the API and MCP alone.")
@click.option("--telegram-token", default="", hidden=True)
@click.option("--telegram-users", default="", hidden=True)
@click.option(
    "--database",
    default="",
    help="postgresql://… : every tenant's memory and the keys in PostgreSQL, shared by any number of servers"
    " (default: a SQLite file per tenant). [MACUPOS_DATABASE_URL]",
)
@click.pass_context
def serve_group(
    ctx: click.Context,
    database: str,
    local: bool,
    public_url: str,
    no_web: bool,
    telegram_token: str,
    telegram_users: str,
    host: str,
    port: int,
    certfile: Path | None,
    keyfile: Path | None,
    allow_register: bool,
    use_llm: bool,
    cors: tuple[str, ...],
    forwarded_allow_ips: str,
    rate: float,
    burst: int,
    max_transcript_mb: float,
    request_timeout: float,
    upload_timeout: float,
    head_timeout: float,
    ingest_budget_mb: float,
    max_open_tenants: int,
) -> None:
    """Serve the memory over HTTP to many tenants: REST under /v1, MCP at /mcp, Prometheus at /metrics.

    Every route but /healthz needs an API key (`macupos serve keys create --tenant NAME`). Each tenant's
    memory lives in $MACUPOS_HOME/tenants/<tenant>/. See docs/service.md.
    """
    ctx.meta[DATABASE_KEY] = database
    if ctx.invoked_subcommand is not None:
        # `serve keys create` makes service.db (and maybe $MACUPOS_HOME) too; serving sets it in serve()
        os.umask(OWNER_ONLY_UMASK)
        return
    if (certfile is None) != (keyfile is None):
        raise click.UsageError("TLS needs both --certfile and --keyfile")
    memory = _memory_settings(ctx)
    if local and no_web:
        raise click.UsageError("--local serves the web pages; it cannot go with --no-web")
    web = web_settings(
        local=local,
        enabled=not no_web,
        host=host,
        public_url=public_url,
        telegram_token=telegram_token,
        telegram_users=telegram_users,
        remote=memory.remote,
    )
    limits = Limits(
        transcript_bytes=int(max_transcript_mb * MB),
        rate_per_s=rate,
        rate_burst=burst,
        request_timeout_s=request_timeout,
        upload_timeout_s=upload_timeout,
        head_timeout_s=head_timeout,
        ingest_budget_bytes=int(ingest_budget_mb * MB),
        max_open_tenants=max_open_tenants,
    )
    settings = ServiceSettings(
        home=memory.home,
        host=host,
        port=port,
        certfile=certfile,
        keyfile=keyfile,
        allow_register=allow_register,
        use_llm=use_llm,
        cors_origins=cors,
        forwarded_allow_ips=forwarded_allow_ips,
        limits=limits,
        web=web,
        database_url=database,
    )
    if database:
        check_database(database)
    from service.server import serve  # uvicorn and the app only when serving

    def announce(line: str) -> None:
        click.echo(line, err=True)
        sys.stderr.flush()

    try:
        asyncio.run(serve(settings, memory, announce=announce))
    except (OSError, MemoryStoreError) as exc:  # a port in use, a home that cannot be written
        raise click.ClickException(f"the service could not start: {exc}") from None


def web_settings(
    *,
    local: bool,
    enabled: bool,
    host: str,
    public_url: str,
    telegram_token: str,
    telegram_users: str,
    remote: bool,
) -> WebSettings:
    """The pages' settings from the options (and MACUPOS_PUBLIC_URL, TELEGRAM_BOT_TOKEN, MACUPOS_ALLOWED_USERS,
    parsed as the bot parses them: memory/config/loader.py)."""
    try:
        url = _public_url(public_url)
    except SettingsError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"{exc.setting}: ")) from None
    if not local:
        # The Mini App logs the bot's owner in to the owner's own memory: that is --local's, not a tenant's.
        return WebSettings(enabled=enabled, public_url=url)
    if remote:
        raise click.UsageError(
            "memory lives in a service here (MACUPOS_MEMORY_URL): its pages are that server's, not --local's"
        )
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise click.UsageError("--local listens on 127.0.0.1 only (put a reverse proxy in front to reach it)")
    try:
        users = telegram_user_ids(telegram_users)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    return WebSettings(
        local=True,
        login_token=secrets.token_urlsafe(32),
        public_url=url,
        telegram_token=telegram_token.strip(),
        telegram_users=frozenset(users),
    )


@serve_group.group("keys")
def keys_group() -> None:
    """API keys: created (shown once), listed, revoked. Only their hashes are stored (service.db)."""


@keys_group.command("create")
@click.option("--tenant", required=True, callback=tenant_param, help="The tenant (created when new).")
@click.option("--scope", type=click.Choice(SCOPES), default="write", show_default=True)
@click.option("--label", default="", help="A note shown by `keys list` (who or what holds it).")
@click.option("--json", "as_json", is_flag=True, help='Print {"api_key", "tenant", "key_id", "scope"}.')
@click.pass_context
def create_cmd(ctx: click.Context, tenant: str, scope: Scope, label: str, as_json: bool) -> None:
    """Create a key for TENANT and print it once (read: recall; write: also upload, forget, scripts;
    admin: also /metrics)."""
    new = _with_keys(ctx, lambda keys: keys.create_key(tenant, scope, label=label))
    if as_json:
        out = {"api_key": new.api_key, "tenant": tenant, "key_id": new.record.key_id, "scope": scope}
        click.echo(json.dumps(out))
        return
    click.echo(new.api_key)
    click.echo(f"key {new.record.key_id} for tenant {tenant} (scope {scope}); it is shown only this once", err=True)


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts)) if ts is not None else "-"


@keys_group.command("list")
@click.option("--tenant", help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_cmd(ctx: click.Context, tenant: str | None, as_json: bool) -> None:
    """Every key: its id, tenant, scope, when it was created and revoked (UTC), its label. Never the key."""
    rows = _with_keys(ctx, lambda keys: keys.list_keys(tenant))
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "key_id": r.key_id,
                        "tenant": r.tenant,
                        "scope": r.scope,
                        "label": r.label,
                        "created_at": r.created_at,
                        "revoked_at": r.revoked_at,
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
        return
    click.echo(f"{'KEY ID':14}{'TENANT':24}{'SCOPE':7}{'CREATED':18}{'REVOKED':18}LABEL")
    for r in rows:
        created, revoked = _when(r.created_at), _when(r.revoked_at)
        click.echo(f"{r.key_id:14}{r.tenant:24}{r.scope:7}{created:18}{revoked:18}{r.label}")


@keys_group.command("revoke")
@click.argument("key_id")
@click.pass_context
def revoke_cmd(ctx: click.Context, key_id: str) -> None:
    """Revoke KEY_ID (as `keys list` shows it); a running server refuses it from its next request."""
    record = _with_keys(ctx, lambda keys: keys.revoke(key_id))
    if record is None:
        raise click.ClickException(f"no key with id {key_id!r} (see: macupos serve keys list)")
    click.echo(f"revoked key {record.key_id} of tenant {record.tenant}")


serve_group.add_command(migrate_cmd)
