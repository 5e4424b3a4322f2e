"""How a `ClaudeSession` starts the Claude Code CLI: the SDK options it passes.

Tools are explicit: the owner's allowed and disallowed lists, plus our own MCP tools (memory, relay) when
their servers are attached. The CLI is started through a tiny setsid launcher so its whole process group
can be killed, and every process it starts carries the session's tag in its environment.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, cast

import claude_agent_sdk as sdk
from claude_agent_sdk import ClaudeAgentOptions, PermissionResult, ToolPermissionContext

from memory.storage import write_atomic
from relay.settings import RelaySettings

__all__ = ["MEMORY_TOOLS", "RELAY_TOOLS", "TAG_ENV", "CanUseTool", "claude_cli_path", "claude_options", "cli_wrapper"]

# The SDK's permission callback; callers give the relay an ``approvals.ApprovalHandler`` instead.
CanUseTool = Callable[[str, dict[str, Any], ToolPermissionContext], Awaitable[PermissionResult]]

TAG_ENV = "MACUPOS_RELAY_TAG"  # marks every process of one session, so none can outlive it unseen
MEMORY_TOOLS = ("mcp__eywa__eywa_get", "mcp__eywa__eywa_search", "mcp__eywa__eywa_show")
RELAY_TOOLS = ("mcp__relay__codex", "mcp__relay__codex_reply")


async def claude_options(
    settings: RelaySettings,
    *,
    project_dir: Path,
    grounding: str,
    tag: str,
    resume: str | None,
    session_id: str,
    mcp_servers: Mapping[str, Any],
    can_use_tool: CanUseTool,
    stderr: Callable[[str], None],
) -> ClaudeAgentOptions:
    """The options of one session's CLI (``session_id`` is used for a new session, ``resume`` otherwise)."""
    s = settings
    servers = dict(mcp_servers)
    allowed = list(s.allowed_tools)
    if s.memory_mcp and "eywa" not in servers:
        servers["eywa"] = _memory_server(s)
    if "eywa" in servers:
        allowed += [t for t in MEMORY_TOOLS if t not in allowed]
    if "relay" in servers:
        allowed += [t for t in RELAY_TOOLS if t not in allowed]
    return ClaudeAgentOptions(
        cwd=project_dir,
        env={**s.env, TAG_ENV: tag},
        system_prompt={"type": "preset", "preset": "claude_code", "append": grounding},
        permission_mode=s.permission_mode,
        allowed_tools=allowed,
        # Always passed, whatever memory says: deny rules are never weakened.
        disallowed_tools=list(s.disallowed_tools),
        model=s.claude_model,
        max_turns=s.max_turns,
        resume=resume,
        session_id=None if resume else session_id,
        mcp_servers=servers,
        can_use_tool=can_use_tool,
        setting_sources=cast(Any, list(s.setting_sources)) if s.setting_sources is not None else None,
        cli_path=await asyncio.to_thread(cli_wrapper, s.home, s.env),
        stderr=stderr,
    )


def claude_cli_path(env: Mapping[str, str]) -> Path:
    """The Claude Code CLI a session runs: ``MACUPOS_CLAUDE_CLI``, else the one claude-agent-sdk ships."""
    configured = env.get("MACUPOS_CLAUDE_CLI")
    return Path(configured).expanduser() if configured else Path(sdk.__file__).parent / "_bundled" / "claude"


def cli_wrapper(home: Path, env: Mapping[str, str]) -> Path | None:
    """A tiny launcher that puts the CLI in its own session (setsid) so its process group can be killed.

    Written only when missing or changed. A process running sessions side by side writes it once before the
    first starts (bot.app): a CLI forked by one session while another session's write had the file open would
    hold it open for writing, and the other's exec of it would fail with "Text file busy"."""
    real = str(claude_cli_path(env))
    if not Path(real).is_file():
        return None  # let the SDK find a CLI; the tag sweep still reaps its processes
    script = f"#!{sys.executable} -IS\nimport os, sys\nos.setsid()\nos.execv({real!r}, [{real!r}, *sys.argv[1:]])\n"
    path = home / "run" / "claude-setsid"
    if not path.is_file() or path.read_text(encoding="utf-8") != script:
        write_atomic(path, script, mode=0o755)
    return path


def _memory_server(settings: RelaySettings) -> dict[str, Any]:
    """Our memory MCP server (``macupos memory mcp``) on stdio, over the same home and config folders."""
    script = Path(sys.executable).parent / "macupos"
    command, args = (
        (str(script), ["memory", "mcp"]) if script.is_file() else (sys.executable, ["-m", "macupos", "memory", "mcp"])
    )
    mem = settings.memory
    env = {
        "MACUPOS_HOME": str(mem.home),
        "CLAUDE_CONFIG_DIR": str(settings.claude_config_dir),
        "CODEX_HOME": str(mem.codex_home),
    }
    return {"type": "stdio", "command": command, "args": args, "env": env}
