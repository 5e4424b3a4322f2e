"""``macupos doctor``'s checks of the agents' CLIs (present, executable, ``--version`` answers) and of their logins.

Logins are judged by the files and variables the Claude Code and Codex CLIs read, never by calling a model API.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bot.doctor_check import Check, fail
from bot.settings import BotSettings
from relay.login import CLAUDE_LOGIN_FIX, CODEX_LOGIN_FIX

__all__ = ["claude_login", "claude_path", "cli_version", "codex_login", "codex_path"]

# Keeps a CLI's `--version` from phoning home or updating itself while the doctor looks at it.
_QUIET_CLI_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


async def cli_version(name: str, path: Path | None, settings: BotSettings, fix: str) -> Check:
    if path is None or not path.is_file():
        return fail(name, f"not found{f' at {path}' if path else ''}", fix)
    if not os.access(path, os.X_OK):
        return fail(name, f"{path} is not executable", f"chmod +x {path}")
    env = {**settings.agent_env, **_QUIET_CLI_ENV}
    try:
        proc = await asyncio.create_subprocess_exec(
            str(path), "--version", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
    except OSError as exc:
        return fail(name, f"{path} does not run: {exc.strerror or exc}", fix)
    try:
        async with asyncio.timeout(30):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return fail(name, f"{path} --version hung", fix)
    if proc.returncode != 0:
        return fail(name, f"{path} --version exited {proc.returncode}", fix)
    return Check(name, True, f"{out.decode(errors='replace').strip()} at {path}")


def claude_path(settings: BotSettings) -> Path | None:
    from relay.claude_options import claude_cli_path  # imported here: `macupos memory …` must not load the SDK

    return claude_cli_path(settings.env)  # the one the relay's sessions run


def codex_path(settings: BotSettings) -> Path | None:
    configured = settings.env.get("MACUPOS_CODEX_CLI")  # the one the relay's Codex turns run, as for Claude
    if configured:
        return Path(configured).expanduser()
    try:
        return Path(str(importlib.import_module("codex_cli_bin").bundled_codex_path()))
    except (ImportError, FileNotFoundError):
        return None


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _key_set(name: str, env: Mapping[str, str], variables: Sequence[str]) -> Check | None:
    """A pass for the first of ``variables`` set in ``env`` (a key or token the CLI reads first); None if none is."""
    for var in variables:
        if env.get(var):
            return Check(name, True, f"{var} is set")
    return None


def claude_login(settings: BotSettings) -> Check:
    """The CLI's own order: an env key or token, a cloud provider, then the stored login of ``/login``."""
    env = settings.env
    name = "claude login"
    if key := _key_set(name, env, ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")):
        return key
    for var in ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"):
        if env.get(var) not in (None, "", "0"):
            return Check(name, True, f"{var}: cloud provider credentials are the provider's to check")
    config_dir = Path(env["CLAUDE_CONFIG_DIR"]).expanduser() if env.get("CLAUDE_CONFIG_DIR") else None
    base = config_dir or settings.memory.claude_config_dir
    creds = _json_file(base / ".credentials.json")
    oauth = creds.get("claudeAiOauth")
    if isinstance(oauth, dict) and oauth.get("accessToken"):
        return Check(name, True, f"logged in ({base / '.credentials.json'})")
    user_home = Path(env.get("HOME") or Path.home())
    for global_config in dict.fromkeys([(config_dir or user_home) / ".claude.json", user_home / ".claude.json"]):
        data = _json_file(global_config)
        if data.get("primaryApiKey"):
            return Check(name, True, f"API key stored in {global_config}")
        if data.get("oauthAccount"):
            # On macOS the token itself is in the login keychain, which only the CLI can read.
            return Check(name, True, f"account in {global_config} (token in the system keychain)")
    if _json_file(base / "settings.json").get("apiKeyHelper"):
        return Check(name, True, f"apiKeyHelper in {base / 'settings.json'}")
    return fail(
        name,
        f"no ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN or stored login under {base}",
        CLAUDE_LOGIN_FIX,
    )


def codex_login(settings: BotSettings) -> Check:
    env = settings.env
    home = settings.memory.codex_home
    name = "codex login"
    config: dict[str, Any] = {}
    try:
        with (home / "config.toml").open("rb") as fh:
            config = tomllib.load(fh)
    except FileNotFoundError:
        pass
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return fail(name, f"cannot read {home / 'config.toml'}: {exc}", "fix the file's TOML syntax")
    provider = str(config.get("model_provider") or "openai")
    table = (config.get("model_providers") or {}).get(provider)
    if isinstance(table, dict):
        env_key = table.get("env_key")
        if env_key:
            if env.get(str(env_key)):
                return Check(name, True, f"provider {provider!r}: {env_key} is set")
            return fail(name, f"provider {provider!r} wants {env_key}, which is not set", f"set {env_key}")
        if table.get("requires_openai_auth") is not True:
            return Check(name, True, f"provider {provider!r} needs no key")
    auth = _json_file(home / "auth.json")
    if auth.get("OPENAI_API_KEY") or auth.get("tokens"):
        return Check(name, True, f"logged in ({home / 'auth.json'})")
    return _key_set(name, env, ("CODEX_API_KEY", "OPENAI_API_KEY")) or fail(
        name, f"no {home / 'auth.json'} and no API key variable", CODEX_LOGIN_FIX
    )
