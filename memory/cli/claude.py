"""`macupos memory hooks install|uninstall`, `hook` and `mcp`: how Claude Code reaches the memory."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Literal

import click

from memory.cli.types import HOME_KEY, SETTINGS_ERROR_KEY, run_command, settings_of
from memory.errors import MemoryStoreError

__all__ = ["hook_cmd", "hooks_group", "mcp_cmd", "self_command"]


def self_command() -> list[str]:
    """How hooks and background jobs call this program again, from any working folder."""
    script = Path(sys.executable).parent / "macupos"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "macupos"]


@click.group("hooks")
def hooks_group() -> None:
    """Install or remove the Claude Code SessionStart / SessionEnd hooks."""


_scope = click.option("--scope", type=click.Choice(["user", "project"]), default="user", show_default=True)
_project_dir = click.option(
    "--project-dir", type=click.Path(path_type=Path, exists=True, file_okay=False), default=".", show_default=True
)


def _hooks_command(name: str, *, install: bool, help: str) -> None:
    """``macupos memory hooks NAME``: install or uninstall our hooks in the scope's settings.json."""

    @hooks_group.command(name, help=help)
    @_scope
    @_project_dir
    @click.pass_context
    def command(ctx: click.Context, scope: str, project_dir: Path) -> None:
        from memory import hooks

        settings = settings_of(ctx)
        where: Literal["user", "project"] = "project" if scope == "project" else "user"
        path = hooks.settings_path_for(where, claude_config_dir=settings.claude_config_dir, project_dir=project_dir)
        try:
            result = (hooks.install if install else hooks.uninstall)(path, self_command())
        except MemoryStoreError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"{path}: {result}")


_hooks_command(
    "install",
    install=True,
    help="Merge our hooks into Claude Code's settings.json (a backup is made first; running twice is harmless).",
)
_hooks_command("uninstall", install=False, help="Remove only our hooks from Claude Code's settings.json.")


@click.command("hook", hidden=True)
@click.argument("event", type=click.Choice(["session-start", "session-end"]))
@click.pass_context
def hook_cmd(ctx: click.Context, event: str) -> None:
    """Entry point Claude Code calls; reads the hook JSON on stdin. Fails open: never blocks Claude."""
    from memory.hooks import log_hook_failure, run_session_end, run_session_start

    error = ctx.meta.get(SETTINGS_ERROR_KEY)
    if error is not None:  # fail open: Claude Code must not show an error or lose its exit for our config
        log_hook_failure(ctx.meta[HOME_KEY], f"{event}: configuration: {error}")
        return
    settings = settings_of(ctx)
    try:
        payload = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    if event == "session-start":
        out = asyncio.run(run_session_start(settings, payload, detach_command=self_command()))
        if out:
            click.echo(out)
    else:
        run_session_end(settings, payload, detach_command=self_command())


@click.command("mcp")
@click.pass_context
def mcp_cmd(ctx: click.Context) -> None:
    """Serve the memory over MCP on stdio (tools eywa_get, eywa_search, eywa_show, eywa_extract, memory).

    With MACUPOS_MEMORY_URL set, the tools answer from that memory service (a transcript_path given to
    eywa_extract is redacted here and uploaded)."""
    from memory.mcp_server import serve_stdio

    run_command(serve_stdio(settings_of(ctx)))
